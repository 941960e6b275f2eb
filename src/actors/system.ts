/**
 * ActorSystem: the registry of a process's actors, the scheduler that runs them, the table of
 * pending asks and the dead-letter count. One per process (or per test).
 *
 * Events: `deadLetter` (DeadLetter), `actorFailed` ({ address, error }), `supervisorRestart`
 * (SupervisorRestart); `error`-free by design: a failing actor is reported, never thrown into
 * the event loop.
 */
import { EventEmitter } from 'node:events'
import { createError, ErrorCodes } from '../errors.js'
import type { ActorFactory } from './actor.js'
import { ActorCell, LocalRef } from './cell.js'
import { systemClock, type Clock } from './clock.js'
import type { StopTimeout } from './context.js'
import { ActorDefaults } from './defaults.js'
import { Scheduler } from './scheduler.js'
import type { AskOptions, DeadLetter, DeadLetterReason, Envelope, ExitReason, Ref, SpawnOptions, SupervisorRestart } from './types.js'

export interface ActorSystemOptions {
  /** This system's name: the first part of every local address. Default `local`. */
  name?: string
  askTimeoutMs?: number
  mailboxCapacity?: number
  throughput?: number
  sliceMs?: number
  stopTimeoutMs?: number
  /** Time and timers; default the real clock (the simulator passes a virtual one). */
  clock?: Clock
}

/** One actor kind's mailboxes (`ActorSystem.mailboxDepths`). */
export interface MailboxDepth { actors: number, queued: number, max: number }

/** Finds a Ref for an address that lives in another system (installed by the transport). */
export type RemoteRouter = (address: string) => Ref | undefined

export class ActorSystem extends EventEmitter {
  readonly name: string
  readonly askTimeoutMs: number
  readonly stopTimeoutMs: number
  readonly clock: Clock
  /** @internal */
  readonly scheduler: Scheduler
  private readonly mailboxCapacity: number
  private readonly throughput: number
  private readonly cells = new Map<string, ActorCell>()
  private readonly topLevel = new Set<ActorCell>()
  private nextId = 0
  private remoteRouter: RemoteRouter | undefined
  private shuttingDown = false
  /** Messages that could not be delivered, by reason. */
  readonly deadLetters: Record<DeadLetterReason, number> = { overloaded: 0, dropped: 0, stopped: 0, 'no-such-actor': 0 }
  /** Replies that arrived after their ask had timed out. */
  lateReplies = 0

  constructor (options: ActorSystemOptions = {}) {
    super()
    this.name = options.name ?? 'local'
    if (this.name.includes('/')) throw createError(ErrorCodes.INVALID_ARGUMENT, 'system name must not contain "/"')
    this.askTimeoutMs = options.askTimeoutMs ?? ActorDefaults.askTimeoutMs
    this.stopTimeoutMs = options.stopTimeoutMs ?? ActorDefaults.stopTimeoutMs
    this.mailboxCapacity = options.mailboxCapacity ?? ActorDefaults.mailboxCapacity
    this.throughput = options.throughput ?? ActorDefaults.throughput
    this.clock = options.clock ?? systemClock
    this.scheduler = new Scheduler(options.sliceMs ?? ActorDefaults.sliceMs, this.clock)
  }

  /**
   * Starts a top-level actor.
   * @param factory makes the actor (called once; supervisors call their own factories again)
   * @param options name, mailbox capacity and overflow policy, throughput
   * @throws WARREN_ERR_DUPLICATE_NAME when the name is taken
   */
  spawn<M> (factory: ActorFactory<M>, options: SpawnOptions = {}): Ref<M> {
    if (this.shuttingDown) throw createError(ErrorCodes.ACTOR_STOPPED, `actor system ${this.name} is shutting down`)
    const cell = this.createCell(undefined, factory as ActorFactory, options)
    this.topLevel.add(cell)
    return cell.self as Ref<M>
  }

  /** @internal Creates, registers and starts a cell; used by `spawn` and `ctx.spawn`. */
  createCell (parent: ActorCell | undefined, factory: ActorFactory, options: SpawnOptions): ActorCell {
    const name = options.name ?? `$${(this.nextId++).toString(36)}`
    const address = `${this.name}/${name}`
    if (this.cells.has(address)) throw createError(ErrorCodes.DUPLICATE_NAME, `an actor named ${address} exists`, { address })
    const cell = new ActorCell(
      this, parent, address, factory,
      options.throughput ?? this.throughput,
      options.mailbox?.capacity ?? this.mailboxCapacity,
      options.mailbox?.overflow ?? ActorDefaults.overflow
    )
    this.cells.set(address, cell)
    cell.start()
    return cell
  }

  /** The Ref of a live local actor, or undefined. */
  lookup<M = unknown> (address: string): Ref<M> | undefined {
    return this.cells.get(address)?.self as Ref<M> | undefined
  }

  /**
   * A Ref for any address: local actors directly, others through the remote router. Returns
   * undefined when the address is local and unknown, or remote with no route.
   */
  refFor<M = unknown> (address: string): Ref<M> | undefined {
    const local = this.cells.get(address)
    if (local !== undefined) return local.self as Ref<M>
    if (address.startsWith(this.name + '/')) return undefined
    return this.remoteRouter?.(address) as Ref<M> | undefined
  }

  /** Installs the function that resolves addresses of other systems (the transport does this). */
  setRemoteRouter (router: RemoteRouter | undefined): void {
    this.remoteRouter = router
  }

  /** Number of live actors. */
  get size (): number { return this.cells.size }

  /**
   * Mailbox depths summed by actor kind (its class name, or what `kindOf` makes of it): live
   * actors, messages queued in all, the deepest queue. By kind, never by actor, so the answer's
   * size is bounded by the code's classes however many actors run.
   */
  mailboxDepths (kindOf: (className: string) => string = (name) => name): Map<string, MailboxDepth> {
    const out = new Map<string, MailboxDepth>()
    for (const cell of this.cells.values()) {
      const kind = kindOf(cell.actor.constructor.name)
      const d = out.get(kind) ?? { actors: 0, queued: 0, max: 0 }
      const depth = cell.depth
      d.actors++
      d.queued += depth
      if (depth > d.max) d.max = depth
      out.set(kind, d)
    }
    return out
  }

  /**
   * Stops an actor gracefully: it finishes its current message, its children stop, postStop
   * runs; after `timeout` ms it is killed. Resolves with its exit reason.
   */
  stop (ref: Ref, timeout: StopTimeout = this.stopTimeoutMs): Promise<ExitReason> {
    const cell = this.cellOf(ref)
    if (cell === undefined) return Promise.resolve('noproc')
    return cell.terminate('shutdown', timeout)
  }

  /** Kills an actor at once (brutal kill); its postStop still runs, unawaited. */
  kill (ref: Ref): void {
    this.cellOf(ref)?.kill('killed')
  }

  /** Resolves with the exit reason when the actor ends (at once when it already has). */
  whenTerminated (ref: Ref): Promise<ExitReason> {
    const cell = this.cellOf(ref)
    return cell === undefined ? Promise.resolve('noproc') : cell.whenTerminated()
  }

  /** True while the actor behind `ref` (local) has not stopped. */
  isAlive (ref: Ref): boolean {
    return this.cellOf(ref)?.isAlive ?? false
  }

  /** Stops every top-level actor, newest first, each within the stop timeout. */
  async shutdown (timeout: StopTimeout = this.stopTimeoutMs): Promise<void> {
    this.shuttingDown = true
    for (const cell of [...this.topLevel].reverse()) await cell.terminate('shutdown', timeout)
  }

  /** @internal The cell behind a local Ref of this system. */
  cellOf (ref: Ref): ActorCell | undefined {
    if (ref instanceof LocalRef && ref.cell.system === this) return ref.cell
    return this.cells.get(ref.address)
  }

  /** @internal */
  unregister (cell: ActorCell): void {
    this.cells.delete(cell.self.address)
    this.topLevel.delete(cell)
  }

  /** @internal Sends `message` to `cell` and waits for the reply. */
  askCell (cell: ActorCell, message: unknown, options: AskOptions | undefined): Promise<unknown> {
    const timeoutMs = options?.timeoutMs ?? this.askTimeoutMs
    return new Promise((resolve, reject) => {
      let settled = false
      // `Infinity` waits as long as it takes (no timer at all): for callers that bound the
      // wait themselves, like the simulator, where millions of idle timers would cost.
      const timer = timeoutMs === Infinity ? undefined : this.clock.setTimeout(() => {
        settled = true
        reject(createError(ErrorCodes.ASK_TIMEOUT, `no reply from ${cell.self.address} within ${timeoutMs} ms`, { address: cell.self.address, timeoutMs }))
      }, timeoutMs)
      const envelope: Envelope = {
        message,
        sender: undefined,
        reply: {
          resolve: (value) => {
            if (settled) { this.lateReplies++; return }
            settled = true
            if (timer !== undefined) this.clock.clearTimeout(timer)
            resolve(value)
          },
          reject: (err) => {
            if (settled) { this.lateReplies++; return }
            settled = true
            if (timer !== undefined) this.clock.clearTimeout(timer)
            reject(err)
          }
        }
      }
      cell.deliver(envelope)
    })
  }

  /**
   * @internal Counts an undelivered message, rejects it if it was an ask, and emits `deadLetter`.
   */
  deadLetter (recipient: string, envelope: Envelope, reason: DeadLetterReason, retryAfterMs?: number): void {
    this.deadLetters[reason]++
    if (envelope.reply !== undefined) {
      envelope.reply.reject(reason === 'overloaded' || reason === 'dropped'
        ? createError(ErrorCodes.OVERLOADED, `${recipient} is overloaded`, { address: recipient, retryAfterMs: retryAfterMs ?? 1 })
        : reason === 'stopped'
          ? createError(ErrorCodes.ACTOR_STOPPED, `${recipient} has stopped`, { address: recipient })
          : createError(ErrorCodes.NO_SUCH_ACTOR, `no actor at ${recipient}`, { address: recipient }))
    }
    if (this.listenerCount('deadLetter') > 0) {
      const letter: DeadLetter = { recipient, message: envelope.message, reason }
      this.emit('deadLetter', letter)
    }
  }

  /** @internal An actor failed: reported as an event, never thrown. */
  reportFailure (address: string, error: unknown): void {
    if (this.listenerCount('actorFailed') > 0) this.emit('actorFailed', { address, error })
  }

  /** @internal A postStop threw: reported, the actor still ends. */
  reportError (address: string, error: unknown): void {
    if (this.listenerCount('actorFailed') > 0) this.emit('actorFailed', { address, error })
  }

  /** @internal A supervisor restarted a child (or scheduled it): reported as an event. */
  reportRestart (event: SupervisorRestart): void {
    if (this.listenerCount('supervisorRestart') > 0) this.emit('supervisorRestart', event)
  }

  /** A snapshot for metrics and debugging. */
  stats (): { actors: number, deadLetters: Record<DeadLetterReason, number>, lateReplies: number } {
    return { actors: this.cells.size, deadLetters: { ...this.deadLetters }, lateReplies: this.lateReplies }
  }
}
