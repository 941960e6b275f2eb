/**
 * The window in which a sandbox's node is away but the sandbox is not gone: its node was lost
 * (a crashed or upgraded node agent comes back and re-adopts it), or the control plane itself
 * restarted and no node has reported it yet. Output reads in that window are answered with a
 * retryable WARREN_ERR_BACKEND_UNAVAILABLE (with `retryAfterMs`) instead of "gone" or "no such
 * sandbox", so a client's output stream waits for the node and then resumes from its last seq.
 * Only for backends whose sandboxes outlive their node agent; bounded by what ends a lost
 * record or an open trajectory (the sandbox's longest life).
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { SandboxRecord } from './directory.js'

export const RejoinDefaults = {
  /** The pause the answer asks for before the read is sent again. */
  retryAfterMs: 500,
  /** Backends whose sandboxes (and their commands) outlive the node agent. */
  durableBackends: ['container', 'microvm'] as readonly string[]
}

/** The retryable answer to a read of sandbox `id` while its node is away. */
export function awayError (id: string): Error {
  return createError(ErrorCodes.BACKEND_UNAVAILABLE, `the node of sandbox ${id} is away; its commands run on: ask again`, {
    id, retryAfterMs: RejoinDefaults.retryAfterMs, reason: 'node-away'
  })
}

/** True when a read of `r` should wait for its node rather than fail: lost with a node that may come back. */
export function awaitsNode (r: SandboxRecord): boolean {
  return r.state === 'lost' && RejoinDefaults.durableBackends.includes(r.backend)
}

/**
 * What a read of a sandbox the directory does not know gets: `awayError` when its trajectory
 * says it began and has not ended (the control plane restarted and its node has not reported
 * it yet), else the lookup's own error.
 * @param isOpen asks the trajectory store whether the tenant's sandbox is open
 */
export async function unknownOrAway (err: unknown, id: string, isOpen: () => Promise<boolean>): Promise<unknown> {
  if (!isWarrenError(err, ErrorCodes.NOT_FOUND)) return err
  return await isOpen().catch(() => false) ? awayError(id) : err
}
