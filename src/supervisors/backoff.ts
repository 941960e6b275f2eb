/**
 * Exponential backoff with jitter, reset after a quiet period: the delay before the next
 * restart (supervisors) or reconnect (transport links) grows `min, factor·min, factor²·min … max`,
 * each spread by ±jitter (never past `max`) so that many restarting things do not retry in lockstep.
 */
export interface BackoffOptions {
  /** First delay, ms. */
  minMs: number
  /** Largest delay, ms. */
  maxMs: number
  /** Growth of the delay per attempt. */
  factor: number
  /** Spread as a fraction of the delay (0.2 = ±20%). */
  jitter: number
  /** A run that lasted this long counts as healthy: the next failure starts again from `minMs`. */
  resetAfterMs: number
}

export const BackoffDefaults: BackoffOptions = { minMs: 100, maxMs: 30_000, factor: 2, jitter: 0.2, resetAfterMs: 60_000 }

export interface Backoff {
  /** The delay before the next attempt; each call multiplies the base by `factor`. */
  next (): number
  /** Reports how long the last run lasted; a long one resets the sequence. */
  ranFor (ms: number): void
  /** Starts the sequence again from `minMs`. */
  reset (): void
  /** Attempts since the last reset. */
  readonly attempts: number
}

export function createBackoff (options: Partial<BackoffOptions> = {}, random: () => number = Math.random): Backoff {
  const o = { ...BackoffDefaults, ...options }
  let attempts = 0
  return {
    next () {
      const base = Math.min(o.maxMs, o.minMs * o.factor ** Math.min(attempts, 60))
      attempts++
      const spread = base * o.jitter * (random() * 2 - 1)
      return Math.max(0, Math.round(Math.min(o.maxMs, base + spread)))
    },
    ranFor (ms) { if (ms >= o.resetAfterMs) attempts = 0 },
    reset () { attempts = 0 },
    get attempts () { return attempts }
  }
}
