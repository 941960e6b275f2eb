/**
 * A counting semaphore with a bounded queue and two priorities. The server uses it to bound the
 * responses it streams at once; the cache uses it to bound chunk fetches, with demand reads
 * (a sandbox is waiting) served before prefetches (nobody is waiting yet).
 */
import { createError, ErrorCodes } from '../../errors.js'

export type Priority = 'high' | 'low'

/** Gives the slot back; calling it twice is harmless. */
export type Release = () => void

/** A place in the queue. */
export interface Ticket {
  /** Resolves with the release function once a slot is granted. */
  readonly granted: Promise<Release>
  /** Moves a waiting low-priority ticket into the high-priority queue (a demand read joined it). */
  promote (): void
}

interface Waiter {
  priority: Priority
  grant: (release: Release) => void
}

export class Limiter {
  private active = 0
  private readonly high: Waiter[] = []
  private readonly low: Waiter[] = []

  /**
   * @param max slots
   * @param maxQueued waiters beyond the slots; one more is refused with WARREN_ERR_OVERLOADED
   */
  constructor (readonly max: number, readonly maxQueued = Infinity) {}

  /** Slots in use and tickets waiting, for metrics and tests. */
  get stats (): { active: number, queued: number } {
    return { active: this.active, queued: this.high.length + this.low.length }
  }

  /**
   * Asks for a slot.
   * @param signal aborting it while the ticket waits removes the ticket and rejects with the signal's reason
   */
  acquire (priority: Priority = 'high', signal?: AbortSignal): Ticket {
    let waiter: Waiter | undefined
    const granted = new Promise<Release>((resolve, reject) => {
      if (signal?.aborted === true) { reject(signal.reason); return }
      if (this.active < this.max) { this.active++; resolve(this.releaser()); return }
      if (this.high.length + this.low.length >= this.maxQueued) {
        reject(createError(ErrorCodes.OVERLOADED, `more than ${this.maxQueued} requests waiting`))
        return
      }
      const onAbort = (): void => {
        this.remove(w)
        reject(signal?.reason)
      }
      const w: Waiter = {
        priority,
        grant: (release) => { signal?.removeEventListener('abort', onAbort); resolve(release) }
      }
      waiter = w
      signal?.addEventListener('abort', onAbort, { once: true })
      ;(priority === 'high' ? this.high : this.low).push(w)
    })
    return {
      granted,
      promote: () => {
        if (waiter === undefined || waiter.priority === 'high' || !this.remove(waiter)) return
        waiter.priority = 'high'
        this.high.push(waiter)
      }
    }
  }

  /** Runs `fn` in a slot. */
  async run<T> (fn: () => Promise<T>, priority: Priority = 'high', signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(priority, signal).granted
    try {
      return await fn()
    } finally {
      release()
    }
  }

  private releaser (): Release {
    let done = false
    return () => {
      if (done) return
      done = true
      const next = this.high.shift() ?? this.low.shift()
      // The slot passes straight to the next waiter, so `active` stays the same.
      if (next !== undefined) next.grant(this.releaser())
      else this.active--
    }
  }

  private remove (w: Waiter): boolean {
    for (const q of [this.high, this.low]) {
      const i = q.indexOf(w)
      if (i >= 0) { q.splice(i, 1); return true }
    }
    return false
  }
}
