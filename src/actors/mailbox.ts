/**
 * An actor's mailbox: a system queue, always drained first, and a bounded user queue.
 *
 * Invariant: the user queue never holds more than `capacity` envelopes. What happens to one
 * more is the overflow policy's choice, and whatever is turned away is returned to the caller
 * so it can be counted as a dead letter (and an ask rejected) — never silently lost.
 */
import { Queue } from './queue.js'
import type { Envelope, ExitReason, OverflowPolicy, Ref } from './types.js'

/** Signals the kernel sends an actor; they bypass the user queue and its limit. */
export type SystemMessage =
  | { kind: 'terminated', ref: Ref, reason: ExitReason }
  | { kind: 'child-exit', ref: Ref, reason: ExitReason }
  | { kind: 'stop', reason: ExitReason }

/** The outcome of offering a user message. */
export type OfferResult =
  | { accepted: true, evicted?: Envelope }
  | { accepted: false, reason: 'overloaded' | 'dropped' }

export class Mailbox {
  readonly system = new Queue<SystemMessage>()
  readonly user = new Queue<Envelope>()

  constructor (readonly capacity: number, readonly overflow: OverflowPolicy) {}

  /** Queues a user message, applying the overflow policy when full. */
  offer (envelope: Envelope): OfferResult {
    if (this.user.length < this.capacity) {
      this.user.push(envelope)
      return { accepted: true }
    }
    switch (this.overflow) {
      case 'reject':
        return { accepted: false, reason: 'overloaded' }
      case 'drop-newest':
        return { accepted: false, reason: 'dropped' }
      case 'drop-oldest': {
        const evicted = this.user.shift()!
        this.user.push(envelope)
        return { accepted: true, evicted }
      }
    }
  }

  /** True when either queue holds something. */
  get hasMessages (): boolean {
    return this.system.length > 0 || this.user.length > 0
  }
}
