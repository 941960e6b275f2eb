/**
 * The scheduler runs actors that have messages, a bounded batch per actor per turn, and yields
 * to the event loop after at most `sliceMs`, so sockets and timers keep being served however
 * busy the actors are.
 */
import type { Clock } from './clock.js'
import { Queue } from './queue.js'

/** What the scheduler needs of an actor. */
export interface Runnable {
  /** True while the actor sits in the run queue. */
  queued: boolean
  /** Handles up to one batch; returns the number of messages handled. */
  runTurn (): number
  /** True when the actor has messages it could handle now. */
  hasWork (): boolean
}

export class Scheduler {
  private readonly runQueue = new Queue<Runnable>(64)
  private pending = false
  /** A running estimate of the cost of one message, in ms; feeds the retry-after hint. */
  msPerMessage = 0.001

  constructor (private readonly sliceMs: number, private readonly clock: Clock) {}

  /** Puts an actor in the run queue unless it is there already. */
  schedule (actor: Runnable): void {
    if (actor.queued) return
    actor.queued = true
    this.runQueue.push(actor)
    if (!this.pending) {
      this.pending = true
      this.clock.defer(this.run)
    }
  }

  // The slice is measured in real time even under a virtual clock: it bounds CPU, not simulated time.
  private readonly run = (): void => {
    const start = performance.now()
    const deadline = start + this.sliceMs
    let handled = 0
    let turns = 0
    for (let actor = this.runQueue.shift(); actor !== undefined; actor = this.runQueue.shift()) {
      actor.queued = false
      handled += actor.runTurn()
      if (actor.hasWork()) {
        actor.queued = true
        this.runQueue.push(actor)
      }
      // Reading the clock costs; every 16 turns is often enough to keep the slice bounded.
      if ((++turns & 15) === 0 && performance.now() > deadline) break
    }
    if (handled > 0) {
      const perMessage = (performance.now() - start) / handled
      this.msPerMessage = this.msPerMessage * 0.8 + perMessage * 0.2
    }
    if (this.runQueue.length > 0) this.clock.defer(this.run)
    else this.pending = false
  }
}
