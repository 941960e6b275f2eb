/**
 * The errors of the fetch side. Every one that a FUSE read may see carries `details.errno:
 * 'EIO'`, so the file system maps them all to EIO without knowing each cause, and
 * `details.reason` so the node's event log says which cause it was.
 *
 * errors.ts has no code for "bad data from a store", so corruption and unreachable stores share
 * BACKEND_UNAVAILABLE and differ in `reason`.
 */
import { createError, ErrorCodes, isWarrenError, type ErrorCode, type WarrenError } from '../../errors.js'

export type BlobFailure =
  /** No answer within `fetchTimeoutMs`. */
  | 'timeout'
  /** Connection refused, reset or dropped mid-body. */
  | 'unreachable'
  /** The store answered with an unexpected HTTP status. */
  | 'status'
  /** Fewer or more body bytes than asked for, or a Content-Range for other bytes. */
  | 'bad-body'
  /** The store sent the whole object for a range request: it does not honour Range. */
  | 'no-range'
  /** A chunk failed its manifest check twice. */
  | 'corrupt'
  /** A manifest that does not parse or does not describe the layer asked for. */
  | 'bad-manifest'
  /** The cache was closed while the fetch ran. */
  | 'closed'
  /** The node's own cache files failed (disk error, files removed under the cache). */
  | 'local-io'

/** Details every blob error carries. */
export interface BlobErrorDetails {
  errno: 'EIO'
  reason: BlobFailure
  [key: string]: unknown
}

/** The code for an HTTP status the store answered with. */
function codeForStatus (status: number): ErrorCode {
  if (status === 401) return ErrorCodes.UNAUTHENTICATED
  if (status === 403) return ErrorCodes.FORBIDDEN
  if (status === 404) return ErrorCodes.NOT_FOUND
  return ErrorCodes.BACKEND_UNAVAILABLE
}

/**
 * Creates a fetch-side error.
 * @param reason which failure; picks the code (TIMEOUT, an HTTP status's code, else BACKEND_UNAVAILABLE)
 * @param message for a human
 * @param details plain data (digest, chunk, url, status…)
 */
export function blobError (reason: BlobFailure, message: string, details: Record<string, unknown> = {}): WarrenError {
  const code = reason === 'timeout'
    ? ErrorCodes.TIMEOUT
    : reason === 'local-io'
      ? ErrorCodes.INTERNAL
      : reason === 'status' && typeof details.status === 'number' ? codeForStatus(details.status) : ErrorCodes.BACKEND_UNAVAILABLE
  const full: BlobErrorDetails = { ...details, errno: 'EIO', reason }
  return createError(code, message, full)
}

/** `err` as is when it is a WarrenError, else wrapped as a `local-io` blob error. */
export function asBlobError (err: unknown, what: Record<string, unknown>): WarrenError {
  if (isWarrenError(err)) return err
  const message = err instanceof Error ? err.message : String(err)
  return blobError('local-io', `the node's layer cache failed: ${message}`, { ...what, cause: (err as NodeJS.ErrnoException).code ?? message })
}

/** The failure reason of a blob error, or undefined for any other error. */
export function blobFailureOf (err: unknown): BlobFailure | undefined {
  if (!isWarrenError(err)) return undefined
  const reason = err.details?.reason
  return typeof reason === 'string' ? reason as BlobFailure : undefined
}
