/**
 * Where the kernel gets its time from. Production uses the real clock; the simulator passes a
 * virtual one, so the same actors (placement shards, registry, supervisors) run a simulated
 * day in seconds, deterministically. Everything in the kernel that waits goes through this.
 */

/** An opaque handle of a pending timer. */
export type TimerHandle = unknown

export interface Clock {
  /** Milliseconds, monotonic within a run. */
  now (): number
  /** Runs `fn` once after `ms`. */
  setTimeout (fn: () => void, ms: number): TimerHandle
  /** Cancels a pending `setTimeout`; no-op for one that fired or was cancelled. */
  clearTimeout (handle: TimerHandle): void
  /** Runs `fn` soon, after pending I/O (the scheduler's turn). */
  defer (fn: () => void): void
}

/** The real clock: Node's timers and setImmediate. */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  defer: (fn) => { setImmediate(fn) }
}
