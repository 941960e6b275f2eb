/**
 * `setTtl`'s bound, in one place for the session (which answers first, by the control plane's
 * clock) and the sandbox (which sets its timer, by its node's): a sandbox may be given any time
 * from now on, as long as its whole life from its creation stays within `SpecDefaults.maxTtlMs`.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { SpecDefaults } from '../spec.js'

/**
 * Checks a new TTL (ms from `now`) for a sandbox created at `createdAt`.
 * @returns the new end, `now + ttlMs`
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `ttlMs`, with `details.max` (the most it may be now)
 */
export function checkTtl (ttlMs: unknown, createdAt: number, now: number, id: string): number {
  const max = Math.max(0, SpecDefaults.maxTtlMs - (now - createdAt))
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > max) {
    throw createError(ErrorCodes.INVALID_ARGUMENT,
      `ttlMs must be a whole number of ms from 1 to ${max} for sandbox ${id}: its whole life stays within ${SpecDefaults.maxTtlMs} ms`, { field: 'ttlMs', max })
  }
  return now + ttlMs
}
