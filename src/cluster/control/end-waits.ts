/**
 * EndWaits: the directory's list of requests waiting for sandboxes to end. A kill answers only
 * once the directory has recorded each sandbox's end — the moment it gives back the sandbox's
 * placement reservation and quota — so what the trainer does next (a create) finds the room
 * free. Bounded: a full list refuses new waits instead of growing.
 */
import type { ReplyTo } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'

interface Wait {
  key: number
  pending: Set<string>
  reply: ReplyTo
  /** What the wait answers with, computed when it settles (ended or not). */
  answer: () => unknown
}

export class EndWaits {
  private readonly byId = new Map<string, Set<Wait>>()
  private readonly byKey = new Map<number, Wait>()
  private ids = 0
  private next = 0

  /** @param maxIds the most sandbox ids waited on at once, over all waits */
  constructor (private readonly maxIds: number) {}

  /**
   * Waits for every id in `pending` to end (the caller passes only live ones).
   * @returns the wait's key, for its timer
   * @throws WARREN_ERR_OVERLOADED when the list holds `maxIds` ids already
   */
  add (pending: readonly string[], reply: ReplyTo, answer: () => unknown): number {
    if (this.ids + pending.length > this.maxIds) {
      throw createError(ErrorCodes.OVERLOADED, 'too many kills are waiting for their sandboxes to end', { retryAfterMs: 500 })
    }
    const wait: Wait = { key: this.next++, pending: new Set(pending), reply, answer }
    this.byKey.set(wait.key, wait)
    for (const id of wait.pending) {
      let set = this.byId.get(id)
      if (set === undefined) { set = new Set(); this.byId.set(id, set) }
      set.add(wait)
    }
    this.ids += wait.pending.size
    return wait.key
  }

  /**
   * A sandbox ended: waits it was the last of answer.
   * @returns the keys of the waits that settled (their timers can go)
   */
  ended (id: string): number[] {
    const waits = this.byId.get(id)
    if (waits === undefined) return []
    this.byId.delete(id)
    const settled: number[] = []
    for (const w of waits) {
      w.pending.delete(id)
      this.ids--
      if (w.pending.size === 0) { this.settle(w); settled.push(w.key) }
    }
    return settled
  }

  /** A wait's time is up: it answers with what has ended so far (the caller sees who has not). */
  expire (key: number): void {
    const w = this.byKey.get(key)
    if (w === undefined) return
    for (const id of w.pending) {
      const set = this.byId.get(id)
      set?.delete(w)
      if (set?.size === 0) this.byId.delete(id)
    }
    this.ids -= w.pending.size
    this.settle(w)
  }

  private settle (w: Wait): void {
    this.byKey.delete(w.key)
    try { w.reply.resolve(w.answer()) } catch (err) { w.reply.reject(err) }
  }
}
