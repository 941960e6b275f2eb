/**
 * Every error warren gives a caller carries a stable `code` (`WARREN_ERR_*`), a human message
 * and optional structured `details`. Codes are the contract: messages may change, codes do not.
 * Errors cross the wire as `{ code, message, details }` (see `toWireError` / `fromWireError`).
 */
import { LONE_SURROGATE, wellFormed } from './text.js'

/** All stable error codes, in one place so a newcomer can read the whole list. */
export const ErrorCodes = {
  ASK_TIMEOUT: 'WARREN_ERR_ASK_TIMEOUT',
  OVERLOADED: 'WARREN_ERR_OVERLOADED',
  NO_SUCH_ACTOR: 'WARREN_ERR_NO_SUCH_ACTOR',
  ACTOR_STOPPED: 'WARREN_ERR_ACTOR_STOPPED',
  ACTOR_FAILED: 'WARREN_ERR_ACTOR_FAILED',
  DUPLICATE_NAME: 'WARREN_ERR_DUPLICATE_NAME',
  SUPERVISOR_INTENSITY: 'WARREN_ERR_SUPERVISOR_INTENSITY',
  FRAME_TOO_LARGE: 'WARREN_ERR_FRAME_TOO_LARGE',
  MALFORMED_FRAME: 'WARREN_ERR_MALFORMED_FRAME',
  UNKNOWN_FRAME_KIND: 'WARREN_ERR_UNKNOWN_FRAME_KIND',
  UNAUTHENTICATED: 'WARREN_ERR_UNAUTHENTICATED',
  FORBIDDEN: 'WARREN_ERR_FORBIDDEN',
  CONNECTION_CLOSED: 'WARREN_ERR_CONNECTION_CLOSED',
  PEER_UNRESPONSIVE: 'WARREN_ERR_PEER_UNRESPONSIVE',
  STREAM_RESUME_GAP: 'WARREN_ERR_STREAM_RESUME_GAP',
  /** The consumer of a stream cancelled it; the producer's writes stop. */
  STREAM_CANCELLED: 'WARREN_ERR_STREAM_CANCELLED',
  /** A well-formed frame that breaks the protocol's rules (credit exceeded, sequence gap, frame out of turn). */
  PROTOCOL_VIOLATION: 'WARREN_ERR_PROTOCOL_VIOLATION',
  /** The client speaks a protocol version the server does not (see docs/protocol.md); `details.supported` lists the server's. */
  PROTOCOL_VERSION: 'WARREN_ERR_PROTOCOL_VERSION',
  INVALID_ARGUMENT: 'WARREN_ERR_INVALID_ARGUMENT',
  NOT_FOUND: 'WARREN_ERR_NOT_FOUND',
  NO_CAPACITY: 'WARREN_ERR_NO_CAPACITY',
  /** A tenant's quota (concurrent sandboxes, creations per second) would be exceeded. */
  QUOTA: 'WARREN_ERR_QUOTA',
  /** A sandbox spec is malformed; `details.field` names the field. */
  BAD_SPEC: 'WARREN_ERR_BAD_SPEC',
  UNSUPPORTED: 'WARREN_ERR_UNSUPPORTED',
  TIMEOUT: 'WARREN_ERR_TIMEOUT',
  SANDBOX_GONE: 'WARREN_ERR_SANDBOX_GONE',
  /** The sandbox is paused or hibernated (`details.state`): resume it first. */
  SANDBOX_PAUSED: 'WARREN_ERR_SANDBOX_PAUSED',
  /** A backend cannot run work right now (its worker pool is restarting, broken or closed); see `details`. */
  BACKEND_UNAVAILABLE: 'WARREN_ERR_BACKEND_UNAVAILABLE',
  /** The control plane's state database cannot be read (corrupt, or from a newer warren); `details.file` names it. */
  STATE_UNREADABLE: 'WARREN_ERR_STATE_UNREADABLE',
  INTERNAL: 'WARREN_ERR_INTERNAL'
} as const

export type ErrorCode = typeof ErrorCodes[keyof typeof ErrorCodes]

const KNOWN_CODES = new Set<string>(Object.values(ErrorCodes))

/** Structured extra information; must be msgpack-encodable (plain data). */
export type ErrorDetails = Record<string, unknown>

/** The one error class of warren. `code` is stable; `details` is plain data. */
export class WarrenError extends Error {
  readonly code: ErrorCode
  readonly details: ErrorDetails | undefined

  constructor (code: ErrorCode, message: string, details?: ErrorDetails) {
    super(message)
    this.name = 'WarrenError'
    this.code = code
    this.details = details
  }
}

/**
 * Creates a `WarrenError` with a code attached: the single error factory.
 * @param code one of `ErrorCodes`
 * @param message what went wrong, for a human
 * @param details plain data a program can act on (e.g. `{ retryAfterMs }`)
 */
export function createError (code: ErrorCode, message: string, details?: ErrorDetails): WarrenError {
  return new WarrenError(code, message, details)
}

/** True when `err` is a WarrenError, optionally with the given code. */
export function isWarrenError (err: unknown, code?: ErrorCode): err is WarrenError {
  return err instanceof WarrenError && (code === undefined || err.code === code)
}

/** The shape an error takes on the wire. */
export interface WireError {
  code: string
  message: string
  details?: ErrorDetails
}

/** Converts any thrown value into its wire form; unknown errors become `WARREN_ERR_INTERNAL`. */
export function toWireError (err: unknown): WireError {
  if (err instanceof WarrenError) {
    return err.details === undefined
      ? { code: err.code, message: wellFormed(err.message) }
      : { code: err.code, message: wellFormed(err.message), details: wellFormedDetails(err.details) }
  }
  const message = err instanceof Error ? err.message : String(err)
  return { code: ErrorCodes.INTERNAL, message: wellFormed(message) }
}

/** Details whose strings any peer decodes (a path a message echoes may hold a name's raw bytes). */
function wellFormedDetails (details: ErrorDetails): ErrorDetails {
  if (!Object.values(details).some((v) => typeof v === 'string' && LONE_SURROGATE.test(v))) return details
  return Object.fromEntries(Object.entries(details).map(([k, v]) => [k, typeof v === 'string' ? wellFormed(v) : v]))
}

/** Rebuilds a WarrenError from its wire form; a code this version does not know becomes INTERNAL. */
export function fromWireError (wire: unknown): WarrenError {
  if (wire === null || typeof wire !== 'object') return createError(ErrorCodes.INTERNAL, 'malformed error from peer')
  const w = wire as Partial<WireError>
  const code = typeof w.code === 'string' && KNOWN_CODES.has(w.code) ? w.code as ErrorCode : ErrorCodes.INTERNAL
  const message = typeof w.message === 'string' ? w.message : 'error from peer'
  const details = w.details !== null && typeof w.details === 'object' ? w.details : undefined
  return createError(code, message, details)
}
