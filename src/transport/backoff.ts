/**
 * Exponential backoff with jitter for reconnects. Jitter spreads the reconnects of many clients
 * that lost the same server at the same moment, so they do not all return in the same instant.
 */
import type { ReconnectOptions } from './defaults.js'

export interface Backoff {
  /** Failed attempts since the last reset. */
  readonly attempts: number
  /** The delay before the next attempt; counts one attempt. */
  next (): number
  /** Back to the first delay (after a successful connection). */
  reset (): void
}

/**
 * Creates a backoff: attempt n waits min(maxDelayMs, minDelayMs * factor^n), of which a random
 * fraction up to `jitter` is taken away.
 * @param options delays, growth factor, jitter
 * @param random source of randomness in [0, 1) (tests pass a fixed one)
 */
export function createBackoff (options: ReconnectOptions, random: () => number = Math.random): Backoff {
  let attempts = 0
  return {
    get attempts () { return attempts },
    next () {
      const base = Math.min(options.maxDelayMs, options.minDelayMs * Math.pow(options.factor, attempts))
      attempts++
      return Math.round(base * (1 - options.jitter * random()))
    },
    reset () { attempts = 0 }
  }
}
