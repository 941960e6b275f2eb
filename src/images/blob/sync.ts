/**
 * Group commit for fdatasync: many chunks finishing together share one sync instead of paying
 * one each. A caller arriving while a sync runs cannot be covered by it (its write may have
 * landed after the sync began), so it waits for the next one, which all such callers share.
 */

export interface SyncBatcher {
  /** Resolves once every write issued before this call is durable. */
  sync (): Promise<void>
}

/** Wraps a sync function (e.g. `() => fileHandle.datasync()`) in group commit. */
export function createSyncBatcher (doSync: () => Promise<void>): SyncBatcher {
  let running: Promise<void> | undefined
  let next: Promise<void> | undefined
  const start = (): Promise<void> => {
    const p = doSync()
    running = p
    const clear = (): void => { if (running === p) running = undefined }
    p.then(clear, clear)
    return p
  }
  return {
    sync () {
      if (running === undefined) return start()
      if (next === undefined) {
        const after = running.then(() => undefined, () => undefined)
        next = after.then(() => {
          next = undefined
          return start()
        })
      }
      return next
    }
  }
}
