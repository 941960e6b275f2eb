/**
 * A virtual clock for the simulator: time moves only when the simulation says so, from event
 * to event, so a simulated day takes as long as its events take to handle — and the same
 * seed gives the same run. Implements the kernel's Clock, so the real actors run on it.
 */
import type { Clock, TimerHandle } from '../src/actors/index.js'

interface Timer { at: number, seq: number, fn: () => void, cancelled: boolean }

/** A binary min-heap ordered by (time, insertion), so equal times run first come, first served. */
class TimerHeap {
  private readonly items: Timer[] = []
  get size (): number { return this.items.length }
  peek (): Timer | undefined { return this.items[0] }

  push (t: Timer): void {
    const a = this.items
    a.push(t)
    let i = a.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(a[i]!, a[parent]!)) break
      ;[a[i], a[parent]] = [a[parent]!, a[i]!]
      i = parent
    }
  }

  pop (): Timer | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (a.length > 0 && last !== undefined) {
      a[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < a.length && before(a[l]!, a[m]!)) m = l
        if (r < a.length && before(a[r]!, a[m]!)) m = r
        if (m === i) break
        ;[a[i], a[m]] = [a[m]!, a[i]!]
        i = m
      }
    }
    return top
  }
}

function before (x: Timer, y: Timer): boolean {
  return x.at < y.at || (x.at === y.at && x.seq < y.seq)
}

export interface VirtualClock extends Clock {
  /**
   * Runs every event due up to `until` (virtual ms), in order, advancing time to each. Between
   * events of different times it lets promise continuations settle, so async actor code sees
   * the same order it would in real time.
   */
  runUntil (until: number): Promise<void>
  /** Events waiting. */
  readonly pending: number
  /** Events run so far. */
  readonly events: number
}

export function createVirtualClock (start = 0): VirtualClock {
  const heap = new TimerHeap()
  let now = start
  let seq = 0
  let events = 0
  const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
  return {
    now: () => now,
    setTimeout (fn, ms) {
      const t: Timer = { at: now + Math.max(0, ms), seq: seq++, fn, cancelled: false }
      heap.push(t)
      return t as TimerHandle
    },
    clearTimeout (handle) {
      if (handle !== null && typeof handle === 'object') (handle as Timer).cancelled = true
    },
    defer (fn) {
      heap.push({ at: now, seq: seq++, fn, cancelled: false })
    },
    async runUntil (until) {
      for (;;) {
        const next = heap.peek()
        if (next === undefined || next.at > until) break
        const at = next.at
        // Everything due at this instant runs back to back; then pending promises settle.
        while (heap.peek() !== undefined && heap.peek()!.at === at) {
          const t = heap.pop()!
          if (t.cancelled) continue
          now = at
          events++
          t.fn()
        }
        await settle()
      }
      now = Math.max(now, until)
    },
    get pending () { return heap.size },
    get events () { return events }
  }
}
