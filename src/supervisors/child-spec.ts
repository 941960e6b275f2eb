/** How a supervisor starts, restarts and stops one child — OTP's child specification. */
import type { ActorFactory, SpawnOptions } from '../actors/index.js'
import type { BackoffOptions } from './backoff.js'

/**
 * - `permanent`: always restarted.
 * - `transient`: restarted only after an abnormal exit (not `normal` or `shutdown`).
 * - `temporary`: never restarted (sandboxes: a crashed sandbox is reclaimed, not revived).
 */
export type RestartType = 'permanent' | 'transient' | 'temporary'

/**
 * - `brutal_kill`: killed at once.
 * - a number: that many ms for a graceful stop, then killed.
 * - `infinity`: waited for as long as it takes (use for children that are supervisors).
 */
export type Shutdown = 'brutal_kill' | number | 'infinity'

export interface ChildSpec<M = unknown> {
  /** Unique among the supervisor's children. */
  id: string
  /** Makes a fresh actor; called on every (re)start. */
  start: ActorFactory<M>
  /** Passed to spawn (name, mailbox); a name is reused by every restart of the child. */
  spawn?: SpawnOptions
  restart?: RestartType
  shutdown?: Shutdown
  /**
   * Restart after an exponentially growing delay instead of at once. Such restarts do not count
   * towards the supervisor's intensity: the growing delay is their brake.
   */
  backoff?: Partial<BackoffOptions>
}

export const ChildSpecDefaults = { restart: 'permanent' as RestartType, shutdown: 5000 as Shutdown }

/** The kernel's stop timeout for a shutdown setting. */
export function stopTimeoutOf (shutdown: Shutdown): number | 'infinity' {
  if (shutdown === 'brutal_kill') return 0
  return shutdown
}
