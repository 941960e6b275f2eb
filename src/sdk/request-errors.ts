/**
 * The SDK's side of "internal codes never reach a user": a request the link gives up on
 * rejects with the transport's WARREN_ERR_ASK_TIMEOUT, which names a kernel address. The
 * trainer gets WARREN_ERR_TIMEOUT naming the request and the control plane instead (the SDK's
 * own retries treat both alike).
 */
import { createError, ErrorCodes, isWarrenError } from '../errors.js'

/**
 * @param err what the link rejected with
 * @param type the request's type (`create`, `kill`…)
 * @param url the control plane asked
 */
export function requestError (err: unknown, type: string, url: string): unknown {
  if (isWarrenError(err, ErrorCodes.ASK_TIMEOUT)) {
    const timeoutMs = err.details?.timeoutMs
    return createError(ErrorCodes.TIMEOUT, `the control plane at ${url} did not answer the ${type} request${typeof timeoutMs === 'number' ? ` within ${timeoutMs} ms` : ''}`, {
      ...(typeof timeoutMs === 'number' ? { timeoutMs } : {})
    })
  }
  return err
}
