/**
 * ActorCell: the kernel's record of one live actor — its mailbox, lifecycle, children,
 * watchers and timers. Users never see a cell; they hold a Ref and the actor holds `ctx`
 * (which is the cell, seen through the ActorContext interface).
 *
 * Lifecycle: starting → running → stopping → stopped. Invariants:
 * - at most one behaviour method runs at a time (`busy` covers a pending promise);
 * - a stopped cell is out of the registry, its mailbox is drained into dead letters, its
 *   watchers and parent have been told, and `postStop` has been called exactly once.
 */
import { createError, ErrorCodes, isWarrenError } from '../errors.js'
import type { Actor, ActorFactory } from './actor.js'
import type { TimerHandle } from './clock.js'
import type { ActorContext, StopTimeout } from './context.js'
import { Mailbox, type SystemMessage } from './mailbox.js'
import type { Runnable } from './scheduler.js'
import type { ActorSystem } from './system.js'
import type { AskOptions, Envelope, ExitReason, OverflowPolicy, Ref, ReplyTo, SpawnOptions } from './types.js'

type State = 'starting' | 'running' | 'stopping' | 'stopped'

const NO_REPLY: ReplyTo = { resolve () {}, reject () {} }

function isPromiseLike (v: unknown): v is PromiseLike<unknown> {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function'
}

/** The Ref of a local actor: holds its cell directly, so a tell costs no lookup. */
export class LocalRef<M = unknown> implements Ref<M> {
  constructor (readonly address: string, /** @internal */ readonly cell: ActorCell) {}

  tell (message: M, sender?: Ref): boolean {
    return this.cell.deliver({ message, sender, reply: undefined })
  }

  ask<R = unknown> (message: M, options?: AskOptions): Promise<R> {
    return this.cell.system.askCell(this.cell, message, options) as Promise<R>
  }

  toJSON (): string { return this.address }
}

export class ActorCell implements Runnable, ActorContext {
  readonly self: LocalRef
  readonly actor: Actor
  queued = false
  private state: State = 'starting'
  private busy = false
  private readonly mailbox: Mailbox
  private current: Envelope | undefined
  private replyDeferred = false
  private kids: Set<ActorCell> | undefined
  private watchers: Set<ActorCell> | undefined
  private watching: Set<ActorCell> | undefined
  private timers: Map<string, TimerHandle> | undefined
  private postStopCalled = false
  private exitReason: ExitReason | undefined
  private terminationWaiters: Array<(reason: ExitReason) => void> | undefined
  private killTimer: TimerHandle | undefined

  constructor (
    readonly system: ActorSystem,
    readonly parentCell: ActorCell | undefined,
    address: string,
    factory: ActorFactory,
    private readonly throughput: number,
    capacity: number,
    overflow: OverflowPolicy
  ) {
    this.self = new LocalRef(address, this)
    this.mailbox = new Mailbox(capacity, overflow)
    this.actor = factory()
    this.actor.ctx = this
  }

  // ── ActorContext ────────────────────────────────────────────────────────────────────────

  get parent (): Ref | undefined { return this.parentCell?.self }
  /** Messages waiting in the user queue (metrics read it; the system queue is always short). */
  get depth (): number { return this.mailbox.user.length }
  get sender (): Ref | undefined { return this.current?.sender }

  spawn<C> (factory: ActorFactory<C>, options?: SpawnOptions): Ref<C> {
    if (this.state === 'stopping' || this.state === 'stopped') {
      throw createError(ErrorCodes.ACTOR_STOPPED, `${this.self.address} is stopping and cannot spawn`)
    }
    const child = this.system.createCell(this, factory as ActorFactory, options ?? {})
    ;(this.kids ??= new Set()).add(child)
    return child.self as Ref<C>
  }

  children (): Ref[] {
    return this.kids === undefined ? [] : [...this.kids].map((c) => c.self)
  }

  watch (ref: Ref): void {
    const target = this.system.cellOf(ref)
    if (target === undefined || target.state === 'stopped') {
      this.signal({ kind: 'terminated', ref, reason: target?.exitReason ?? 'noproc' })
      return
    }
    ;(target.watchers ??= new Set()).add(this)
    ;(this.watching ??= new Set()).add(target)
  }

  unwatch (ref: Ref): void {
    const target = this.system.cellOf(ref)
    if (target === undefined) return
    target.watchers?.delete(this)
    this.watching?.delete(target)
  }

  stop (reason: ExitReason = 'normal'): void {
    this.signal({ kind: 'stop', reason })
  }

  fail (error: unknown): void {
    void this.terminate({ failed: true, error }, this.system.stopTimeoutMs)
  }

  stopChild (ref: Ref, timeout: StopTimeout): Promise<void> {
    const child = this.system.cellOf(ref)
    if (child === undefined || child.parentCell !== this) return Promise.resolve()
    return child.terminate('shutdown', timeout).then(() => undefined)
  }

  defer (): ReplyTo {
    this.replyDeferred = true
    return this.current?.reply ?? NO_REPLY
  }

  answerLater (work: PromiseLike<unknown>): void {
    const reply = this.defer()
    work.then((value) => reply.resolve(value), (err: unknown) => reply.reject(err))
  }

  setTimer (key: string, ms: number, message: unknown, options?: { repeat?: boolean }): void {
    if (this.state === 'stopping' || this.state === 'stopped') return
    this.cancelTimer(key)
    const clock = this.system.clock
    const fire = (): void => {
      // A repeating timer re-arms itself, so a virtual clock needs nothing but setTimeout.
      if (options?.repeat) this.timers?.set(key, clock.setTimeout(fire, ms))
      else this.timers?.delete(key)
      this.deliver({ message, sender: undefined, reply: undefined })
    }
    ;(this.timers ??= new Map()).set(key, clock.setTimeout(fire, ms))
  }

  cancelTimer (key: string): void {
    const timer = this.timers?.get(key)
    if (timer !== undefined) {
      this.system.clock.clearTimeout(timer)
      this.timers!.delete(key)
    }
  }

  // ── Delivery ────────────────────────────────────────────────────────────────────────────

  /** Queues a user message; returns false (and records a dead letter) when it is turned away. */
  deliver (envelope: Envelope): boolean {
    if (this.state === 'stopping' || this.state === 'stopped') {
      this.system.deadLetter(this.self.address, envelope, 'stopped')
      return false
    }
    const result = this.mailbox.offer(envelope)
    if (!result.accepted) {
      this.system.deadLetter(this.self.address, envelope, result.reason, this.retryAfterMs())
      return false
    }
    if (result.evicted !== undefined) this.system.deadLetter(this.self.address, result.evicted, 'dropped', this.retryAfterMs())
    if (!this.busy) this.system.scheduler.schedule(this)
    return true
  }

  /** Queues a kernel signal; signals are never refused and always handled first. */
  signal (message: SystemMessage): void {
    if (this.state === 'stopped') return
    this.mailbox.system.push(message)
    if (!this.busy) this.system.scheduler.schedule(this)
  }

  /** A hint for a rejected sender: the time the current backlog should take to drain. */
  private retryAfterMs (): number {
    return Math.max(1, Math.ceil(this.mailbox.user.length * this.system.scheduler.msPerMessage))
  }

  // ── Running ─────────────────────────────────────────────────────────────────────────────

  /** Starts the actor: runs preStart (if any) before the first message. */
  start (): void {
    if (this.actor.preStart === undefined) {
      this.state = 'running'
      return
    }
    this.invoke(undefined, () => this.actor.preStart!(), () => {
      if (this.state === 'starting') this.state = 'running'
    })
  }

  hasWork (): boolean {
    if (this.busy || this.state === 'stopped') return false
    return this.mailbox.system.length > 0 || (this.state === 'running' && this.mailbox.user.length > 0)
  }

  runTurn (): number {
    const mb = this.mailbox
    while (mb.system.length > 0 && !this.busy && this.state !== 'stopped') {
      this.handleSignal(mb.system.shift()!)
    }
    let handled = 0
    while (handled < this.throughput && !this.busy && this.state === 'running' && mb.user.length > 0) {
      const envelope = mb.user.shift()!
      handled++
      this.invoke(envelope, () => this.actor.receive(envelope.message))
      if (mb.system.length > 0) break // signals go first
    }
    return handled
  }

  private handleSignal (message: SystemMessage): void {
    if (this.state === 'stopping') return // a stopping actor has nothing left to react to
    switch (message.kind) {
      case 'stop':
        // A deadline armed by whoever asked for the stop stays; otherwise the default applies.
        void this.terminate(message.reason, this.killTimer === undefined ? this.system.stopTimeoutMs : 'infinity')
        break
      case 'terminated':
        if (this.actor.onTerminated) this.invoke(undefined, () => this.actor.onTerminated!(message.ref, message.reason))
        break
      case 'child-exit':
        if (this.actor.onChildExit) this.invoke(undefined, () => this.actor.onChildExit!(message.ref, message.reason))
        break
    }
  }

  /**
   * Runs one behaviour method. A returned promise makes the actor busy until it settles; the
   * result answers the envelope's ask unless the actor deferred the reply.
   */
  private invoke (envelope: Envelope | undefined, fn: () => unknown, after?: () => void): void {
    this.current = envelope
    this.replyDeferred = false
    let result: unknown
    try {
      result = fn()
    } catch (err) {
      this.current = undefined
      this.onBehaviourError(envelope, err, false)
      return
    }
    if (!isPromiseLike(result)) {
      if (envelope?.reply !== undefined && !this.replyDeferred) envelope.reply.resolve(result)
      this.current = undefined
      after?.()
      return
    }
    this.busy = true
    const deferred = this.replyDeferred
    result.then(
      (value) => {
        this.busy = false
        this.current = undefined
        if (envelope?.reply !== undefined && !deferred) envelope.reply.resolve(value)
        after?.()
        this.resume()
      },
      (err: unknown) => {
        this.busy = false
        this.current = undefined
        this.onBehaviourError(envelope, err, deferred)
        this.resume()
      }
    )
  }

  private resume (): void {
    if (this.hasWork()) this.system.scheduler.schedule(this)
  }

  /** A WarrenError answering an ask is the answer; anything else fails the actor. */
  private onBehaviourError (envelope: Envelope | undefined, err: unknown, deferred: boolean): void {
    const reply = envelope?.reply !== undefined && !deferred && !this.replyDeferred ? envelope.reply : undefined
    if (reply !== undefined && isWarrenError(err) && this.state === 'running') {
      reply.reject(err)
      return
    }
    reply?.reject(createError(ErrorCodes.ACTOR_FAILED, `${this.self.address} failed: ${err instanceof Error ? err.message : String(err)}`, { address: this.self.address }))
    this.fail(err)
  }

  // ── Ending ──────────────────────────────────────────────────────────────────────────────

  /** Resolves with the exit reason once the actor has stopped. */
  whenTerminated (): Promise<ExitReason> {
    if (this.state === 'stopped') return Promise.resolve(this.exitReason!)
    return new Promise((resolve) => { (this.terminationWaiters ??= []).push(resolve) })
  }

  get isAlive (): boolean { return this.state !== 'stopped' }

  /**
   * Ends the actor: children stop (newest first), then postStop, then the cell is finalised.
   * `timeout` bounds the graceful part; `0` kills at once. A second call while stopping only
   * tightens the deadline.
   */
  terminate (reason: ExitReason, timeout: StopTimeout): Promise<ExitReason> {
    if (this.state === 'stopped') return Promise.resolve(this.exitReason!)
    const done = this.whenTerminated()
    if (timeout === 0) {
      this.kill(reason === 'shutdown' || reason === 'normal' ? 'killed' : reason)
      return done
    }
    if (this.state === 'stopping') return done
    if (typeof timeout === 'number' && this.killTimer === undefined) {
      this.killTimer = this.system.clock.setTimeout(() => this.kill('killed'), timeout)
    }
    if (this.busy) {
      // Graceful means the message in hand completes first: stop when it settles.
      this.signal({ kind: 'stop', reason })
      return done
    }
    this.state = 'stopping'
    this.exitReason = reason
    this.clearTimers()
    this.stopGracefully(reason)
    return done
  }

  private stopGracefully (reason: ExitReason): void {
    const hasChildren = this.kids !== undefined && this.kids.size > 0
    if (!hasChildren && this.actor.postStop === undefined) {
      this.finalize(reason) // the common case stays synchronous: no promise, no timer
      return
    }
    void (async () => {
      if (hasChildren && this.actor.stopChildren !== undefined) {
        try {
          await this.actor.stopChildren(reason)
        } catch (err) {
          this.system.reportError(this.self.address, err)
        }
      }
      const children = this.kids === undefined ? [] : [...this.kids].reverse()
      for (const child of children) await child.terminate('shutdown', this.system.stopTimeoutMs)
      if (this.state === 'stopped') return
      try {
        await this.callPostStop(reason)
      } catch (err) {
        this.system.reportError(this.self.address, err)
      }
      this.finalize(reason)
    })()
  }

  /** Brutal kill: children killed, postStop called without waiting, the cell finalised now. */
  kill (reason: ExitReason = 'killed'): void {
    if (this.state === 'stopped') return
    this.state = 'stopping'
    this.clearTimers()
    if (this.kids !== undefined) for (const child of [...this.kids].reverse()) child.kill('killed')
    // Reclaim runs whichever way an actor ends, so postStop still runs; nobody waits for it.
    Promise.resolve()
      .then(() => this.callPostStop(reason))
      .catch((err: unknown) => this.system.reportError(this.self.address, err))
    this.finalize(reason)
  }

  private callPostStop (reason: ExitReason): unknown {
    if (this.postStopCalled || this.actor.postStop === undefined) return undefined
    this.postStopCalled = true
    return this.actor.postStop(reason)
  }

  private clearTimers (): void {
    if (this.timers === undefined) return
    for (const timer of this.timers.values()) this.system.clock.clearTimeout(timer)
    this.timers.clear()
  }

  private finalize (reason: ExitReason): void {
    if (this.state === 'stopped') return
    this.state = 'stopped'
    this.exitReason = reason
    if (this.killTimer !== undefined) this.system.clock.clearTimeout(this.killTimer)
    this.system.unregister(this)
    for (const envelope of this.mailbox.user.drain()) this.system.deadLetter(this.self.address, envelope, 'stopped')
    this.mailbox.system.drain()
    if (this.watching !== undefined) for (const target of this.watching) target.watchers?.delete(this)
    if (this.watchers !== undefined) {
      for (const watcher of this.watchers) {
        watcher.watching?.delete(this)
        watcher.signal({ kind: 'terminated', ref: this.self, reason })
      }
    }
    if (this.parentCell !== undefined) {
      this.parentCell.kids?.delete(this)
      this.parentCell.signal({ kind: 'child-exit', ref: this.self, reason })
    }
    if (typeof reason === 'object') this.system.reportFailure(this.self.address, reason.error)
    const waiters = this.terminationWaiters
    this.terminationWaiters = undefined
    if (waiters !== undefined) for (const resolve of waiters) resolve(reason)
  }
}
