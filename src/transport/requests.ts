/**
 * The requests a link is waiting on: correlation ids, timeouts, and the bound on how many may
 * be outstanding. Ids are per link and only need to be unique among the outstanding ones.
 */
import { createError, ErrorCodes, type WarrenError } from '../errors.js'
import { MAX_TIMEOUT_MS } from './frames.js'

interface Pending {
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
  timer: NodeJS.Timeout
}

export interface PendingRequests {
  /** Requests waiting for an answer. */
  readonly size: number
  /**
   * Registers a request that times out with WARREN_ERR_ASK_TIMEOUT after `timeoutMs`.
   * @returns its correlation id and the promise of its answer
   * @throws WARREN_ERR_OVERLOADED when `max` requests are already waiting
   */
  add<R> (timeoutMs: number, to: string): { id: number, promise: Promise<R> }
  /** Resolves request `id`; false when it is not waiting (answered, timed out, unknown). */
  resolve (id: number, value: unknown): boolean
  /** Rejects request `id`; false when it is not waiting. */
  reject (id: number, err: unknown): boolean
  /** Rejects every waiting request (the link died for good). */
  rejectAll (err: WarrenError): void
}

class RequestTable implements PendingRequests {
  private readonly pending = new Map<number, Pending>()
  private nextId = 0

  constructor (private readonly max: number) {}

  get size (): number { return this.pending.size }

  add<R> (timeoutMs: number, to: string): { id: number, promise: Promise<R> } {
    if (this.pending.size >= this.max) {
      throw createError(ErrorCodes.OVERLOADED, `${this.max} requests already in flight on this link`, { limit: this.max })
    }
    // Wrap at 2^32 so ids stay small on the wire; skip any id still in use.
    do { this.nextId = (this.nextId + 1) >>> 0 } while (this.nextId === 0 || this.pending.has(this.nextId))
    const id = this.nextId
    // Node timers hold 32-bit signed ms; beyond that they fire at once, so clamp (and NaN/negatives to 0).
    timeoutMs = Math.min(Math.max(timeoutMs, 0) || 0, MAX_TIMEOUT_MS)
    let resolve!: (value: unknown) => void
    let reject!: (err: unknown) => void
    const promise = new Promise<R>((res, rej) => { resolve = res as (value: unknown) => void; reject = rej })
    const timer = setTimeout(() => {
      if (this.pending.delete(id)) {
        reject(createError(ErrorCodes.ASK_TIMEOUT, `no reply from ${to} within ${timeoutMs} ms`, { to, timeoutMs }))
      }
    }, timeoutMs)
    this.pending.set(id, { resolve, reject, timer })
    return { id, promise }
  }

  resolve (id: number, value: unknown): boolean {
    const p = this.pending.get(id)
    if (p === undefined) return false
    this.pending.delete(id)
    clearTimeout(p.timer)
    p.resolve(value)
    return true
  }

  reject (id: number, err: unknown): boolean {
    const p = this.pending.get(id)
    if (p === undefined) return false
    this.pending.delete(id)
    clearTimeout(p.timer)
    p.reject(err)
    return true
  }

  rejectAll (err: WarrenError): void {
    const all = [...this.pending.values()]
    this.pending.clear()
    for (const p of all) {
      clearTimeout(p.timer)
      p.reject(err)
    }
  }
}

/**
 * Creates the table of one link.
 * @param max how many requests may wait at once
 */
export function createPendingRequests (max: number): PendingRequests {
  return new RequestTable(max)
}
