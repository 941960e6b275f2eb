/**
 * The session boundary's last word on an error. The actor kernel's codes (a stopped actor, a
 * missing one, an ask that timed out, a failed one) describe how the control plane is built, not
 * what happened to a tenant's request; they never reach a client as such, and neither do the
 * internal actor addresses their messages and details carry.
 */
import { createError, ErrorCodes, isWarrenError, type ErrorCode, type WarrenError } from '../../errors.js'

const cannot = 'the control plane could not complete this request'

/**
 * Kernel codes, and what each becomes when nothing more specific is known (their messages name
 * actors, so they go; what is said instead is the cause in the cluster's terms).
 */
const KERNEL_CODES: Partial<Record<ErrorCode, { code: ErrorCode, message: string }>> = {
  [ErrorCodes.ASK_TIMEOUT]: { code: ErrorCodes.TIMEOUT, message: 'the request was not answered in time inside the cluster' },
  [ErrorCodes.NO_SUCH_ACTOR]: { code: ErrorCodes.NOT_FOUND, message: 'what the request names does not exist' },
  [ErrorCodes.ACTOR_STOPPED]: { code: ErrorCodes.INTERNAL, message: `${cannot}: the part of the cluster serving it stopped before answering` },
  [ErrorCodes.ACTOR_FAILED]: { code: ErrorCodes.INTERNAL, message: `${cannot}: the part of the cluster serving it failed` },
  [ErrorCodes.SUPERVISOR_INTENSITY]: { code: ErrorCodes.INTERNAL, message: `${cannot}: the part of the cluster serving it failed too often and was stopped` },
  [ErrorCodes.DUPLICATE_NAME]: { code: ErrorCodes.INTERNAL, message: `${cannot}: a name it needed was taken inside the cluster` },
  // A link inside the cluster (to a node, to a sandbox's agent) closed under the request. To a
  // client CONNECTION_CLOSED means its own socket dropped, which this is not.
  [ErrorCodes.CONNECTION_CLOSED]: { code: ErrorCodes.BACKEND_UNAVAILABLE, message: 'the connection to the sandbox\'s node or agent closed during the request' },
  [ErrorCodes.PEER_UNRESPONSIVE]: { code: ErrorCodes.BACKEND_UNAVAILABLE, message: 'the sandbox\'s node or agent stopped answering during the request' }
}

export const PublicErrorDefaults = {
  /**
   * An answer's message and each string of its details are cut to this many characters: they
   * may echo what the client sent (a label key, a path), and an answer must fit its frame.
   */
  maxMessageChars: 2048,
  maxDetailChars: 512
}

/**
 * Turns any error met while handling a client's request into one a client may see.
 * @param err what was thrown
 * @param sandboxId set when the request was on its way to this sandbox: an actor that is gone
 *   or missing there means the sandbox is gone
 * @returns the error itself when its code is public already; otherwise a public one
 */
export function toPublicError (err: unknown, sandboxId?: string): WarrenError {
  if (!isWarrenError(err)) {
    return bounded(createError(ErrorCodes.INTERNAL, `the control plane failed on this request: ${err instanceof Error ? err.message : String(err)}`))
  }
  const mapped = KERNEL_CODES[err.code]
  if (mapped === undefined) return bounded(err)
  if (sandboxId !== undefined && (err.code === ErrorCodes.ACTOR_STOPPED || err.code === ErrorCodes.NO_SUCH_ACTOR)) {
    return createError(ErrorCodes.SANDBOX_GONE, `sandbox ${sandboxId} is gone`, { id: sandboxId, state: 'gone' })
  }
  return createError(mapped.code, mapped.message)
}

/** The error itself when its message and detail strings are within bounds, else a copy cut to them. */
function bounded (err: WarrenError): WarrenError {
  const { maxMessageChars, maxDetailChars } = PublicErrorDefaults
  const long = (v: unknown): boolean => typeof v === 'string' && v.length > maxDetailChars
  if (err.message.length <= maxMessageChars && !Object.values(err.details ?? {}).some(long)) return err
  const cut = (s: string, max: number): string => s.length > max ? `${s.slice(0, max)}…` : s
  const details = err.details === undefined
    ? undefined
    : Object.fromEntries(Object.entries(err.details).map(([k, v]) => [k, typeof v === 'string' ? cut(v, maxDetailChars) : v]))
  return createError(err.code, cut(err.message, maxMessageChars), details)
}

/**
 * What a create tells the trainer when the node chosen for it failed to answer: the node, and
 * how (it did not answer in time, or it went away), never the kernel's codes.
 */
export function nodeCreateError (err: unknown, nodeId: string, timeoutMs: number): WarrenError {
  if (isWarrenError(err, ErrorCodes.ASK_TIMEOUT)) {
    return createError(ErrorCodes.TIMEOUT, `node ${nodeId} did not answer the create within ${timeoutMs} ms`, { nodeId })
  }
  if (isWarrenError(err) && NODE_GONE.has(err.code)) {
    return createError(ErrorCodes.BACKEND_UNAVAILABLE, `node ${nodeId} went away during the create`, { nodeId, reason: 'node-gone' })
  }
  return toPublicError(err)
}

/** Codes meaning the node (its agent, or the link to it) is not there any more. */
const NODE_GONE = new Set<ErrorCode>([ErrorCodes.NO_SUCH_ACTOR, ErrorCodes.ACTOR_STOPPED, ErrorCodes.CONNECTION_CLOSED, ErrorCodes.PEER_UNRESPONSIVE])
