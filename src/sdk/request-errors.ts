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

/** Failures after which a request may just be sent again: lost with a socket, or answered too late. */
const LOST_OR_LATE: ReadonlySet<string> = new Set([ErrorCodes.ASK_TIMEOUT, ErrorCodes.TIMEOUT, ErrorCodes.CONNECTION_CLOSED])

/**
 * Whether a failed request is worth sending again: it was lost or late (or, with `overloaded`,
 * refused as too busy, which means it was not done) — and never once the client is closed, so
 * nothing keeps retrying against a link that will not come back.
 * @param client the SDK's transport, asked whether it is closed
 */
export function worthRetrying (err: unknown, client: { closed (): boolean }, overloaded = false): boolean {
  if (client.closed() || !isWarrenError(err)) return false
  return LOST_OR_LATE.has(err.code) || (overloaded && err.code === ErrorCodes.OVERLOADED)
}

/**
 * The pause before sending a failed request again: the cluster's `retryAfterMs` hint when it gave
 * one (at most 1 s), else 50 ms per attempt so far, at most 1 s.
 * @param attempt how many times it has failed, from 1
 */
export function retryPause (err: unknown, attempt: number): Promise<void> {
  const hint = isWarrenError(err) ? err.details?.retryAfterMs : undefined
  const ms = typeof hint === 'number' ? Math.min(1000, Math.max(1, hint)) : Math.min(1000, 50 * attempt)
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The quotas whose refusal means "not now": nothing was done, and `retryAfterMs` says when to ask. */
const RATE_QUOTAS: ReadonlySet<unknown> = new Set(['requests', 'rate'])

/**
 * The pause before sending again a request the tenant's request or creation rate refused (it
 * was not handled, so sending it again is safe whatever it is): its `retryAfterMs` and up to a
 * fifth more, so requests refused together do not come back together.
 * @returns undefined for any other failure
 */
export function rateLimitPause (err: unknown): number | undefined {
  if (!isWarrenError(err, ErrorCodes.QUOTA) || !RATE_QUOTAS.has(err.details?.quota)) return undefined
  const hint = err.details?.retryAfterMs
  const ms = typeof hint === 'number' && Number.isFinite(hint) && hint > 0 ? hint : 100
  return Math.ceil(ms * (1 + Math.random() / 5))
}
