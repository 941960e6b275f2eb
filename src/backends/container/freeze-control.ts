/**
 * Pause, resume and the freeze a snapshot takes, for one container sandbox, over its cgroup's
 * freezer. One at a time: a pause asked for during a snapshot waits until the snapshot thawed
 * (or left paused) what it froze, so the two never undo each other's work.
 *
 * The paused flag is journaled (by `onPaused`) before the freeze and after the thaw, so a node
 * that restarts finds a frozen sandbox marked paused, never the other way round.
 */
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxCgroup } from './cgroup-types.js'

/** The freezer side of one sandbox. */
export interface FreezeControl {
  /** True while the sandbox is paused (by `pause`, not by a snapshot's own freeze). */
  readonly paused: boolean
  /** Freezes every process of the sandbox. Idempotent. */
  pause (): Promise<void>
  /** Thaws a paused sandbox. Idempotent. */
  resume (): Promise<void>
  /** Runs `work` with the sandbox frozen: frozen for it and thawed after, unless it was paused already. */
  whileFrozen<T> (work: () => Promise<T>): Promise<T>
}

/** The refusal when a sandbox has no freezer: no cgroup provider, or a host without one. */
export function noFreezer (id: string): Error {
  return createError(ErrorCodes.UNSUPPORTED, `container ${id} cannot be paused or snapshotted: this node gives sandboxes no cgroup freezer`)
}

/**
 * The freezer control of one sandbox.
 * @param cgroup its group; without freeze/thaw every call rejects with WARREN_ERR_UNSUPPORTED
 * @param paused whether it starts paused (adopted frozen after a node restart)
 * @param onPaused records the flag (the backend's journal); called before a freeze, after a thaw
 */
export function createFreezeControl (id: string, cgroup: SandboxCgroup | undefined, paused: boolean, onPaused: (paused: boolean) => void): FreezeControl {
  let turn: Promise<unknown> = Promise.resolve()
  /** Runs `fn` after every call before it has finished, whatever became of them. */
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = turn.then(fn, fn)
    turn = next.catch(() => {})
    return next
  }
  const freezer = (): { freeze: () => Promise<void>, thaw: () => Promise<void> } => {
    if (cgroup?.freeze === undefined || cgroup.thaw === undefined) throw noFreezer(id)
    return { freeze: cgroup.freeze.bind(cgroup), thaw: cgroup.thaw.bind(cgroup) }
  }

  return {
    get paused () { return paused },

    pause: async () => {
      const f = freezer()
      await serial(async () => {
        if (paused) return
        onPaused(true)
        try {
          await f.freeze()
        } catch (err) {
          onPaused(false)
          throw err
        }
        paused = true
      })
    },

    resume: async () => {
      const f = freezer()
      await serial(async () => {
        if (!paused) return
        await f.thaw()
        paused = false
        onPaused(false)
      })
    },

    whileFrozen: async <T>(work: () => Promise<T>): Promise<T> => {
      const f = freezer()
      return await serial(async () => {
        if (paused) return await work()
        await f.freeze()
        try {
          return await work()
        } finally {
          await f.thaw()
        }
      })
    }
  }
}
