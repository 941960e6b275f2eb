/**
 * DynamicSupervisor: children of one kind, started on demand (a node's sandboxes). Strategy is
 * always one_for_one. `maxChildren` bounds how many live at once; one more is refused with
 * `WARREN_ERR_NO_CAPACITY`, never queued without bound.
 */
import { Actor, describeReason, isAbnormal, type ExitReason, type Ref, type SpawnOptions } from '../actors/index.js'
import { createError, ErrorCodes, isWarrenError } from '../errors.js'
import { createBackoff, type BackoffOptions } from './backoff.js'
import { ChildSpecDefaults, stopTimeoutOf, type RestartType, type Shutdown } from './child-spec.js'
import { createRestartIntensity, type IntensityOptions, type RestartIntensity } from './intensity.js'

/** The one child spec of a dynamic supervisor; `start` takes the arguments of `start-child`. */
export interface DynamicChildSpec<A, M = unknown> {
  start: (args: A) => Actor<M>
  /** Spawn options for a child, from its arguments (e.g. a name from a sandbox id). */
  spawn?: (args: A) => SpawnOptions
  restart?: RestartType
  shutdown?: Shutdown
  backoff?: Partial<BackoffOptions>
}

export interface DynamicSupervisorOptions<A, M = unknown> {
  child: DynamicChildSpec<A, M>
  intensity?: Partial<IntensityOptions>
  /** Most children alive at once. Default: unbounded (Infinity). */
  maxChildren?: number
}

export type DynamicSupervisorMessage<A> =
  | { type: 'start-child', args: A }
  | { type: 'terminate-child', ref: Ref }
  | { type: 'count' }
  | { type: 'which-children' }
  | { type: 'restart-due', key: number }

interface DynamicChild<A> {
  args: A
  ref: Ref | undefined
  startedAt: number
  backoff: ReturnType<typeof createBackoff> | undefined
}

export class DynamicSupervisor<A, M = unknown> extends Actor<DynamicSupervisorMessage<A>> {
  private readonly spec: DynamicChildSpec<A, M>
  private readonly restart: RestartType
  private readonly shutdown: Shutdown
  private readonly intensity: RestartIntensity
  private readonly maxChildren: number
  /** Children by their current ref's address. */
  private readonly live = new Map<string, DynamicChild<A>>()
  private readonly waitingRestart = new Map<number, DynamicChild<A>>()
  private nextKey = 0

  constructor (options: DynamicSupervisorOptions<A, M>) {
    super()
    this.spec = options.child
    this.restart = options.child.restart ?? ChildSpecDefaults.restart
    this.shutdown = options.child.shutdown ?? ChildSpecDefaults.shutdown
    // Time from the actor system's clock, so a supervisor on a virtual clock counts virtual restarts.
    this.intensity = createRestartIntensity(options.intensity, () => this.ctx.system.clock.now())
    this.maxChildren = options.maxChildren ?? Infinity
  }

  receive (message: DynamicSupervisorMessage<A>): unknown {
    switch (message.type) {
      case 'start-child': {
        if (this.live.size + this.waitingRestart.size >= this.maxChildren) {
          throw createError(ErrorCodes.NO_CAPACITY, `${this.self.address} holds ${this.maxChildren} children, its maximum`)
        }
        const child: DynamicChild<A> = {
          args: message.args,
          ref: undefined,
          startedAt: 0,
          backoff: this.spec.backoff !== undefined ? createBackoff(this.spec.backoff) : undefined
        }
        return this.startChild(child)
      }
      case 'terminate-child': {
        const child = this.live.get(message.ref.address)
        if (child === undefined) return false
        this.live.delete(message.ref.address)
        return this.ctx.stopChild(message.ref, stopTimeoutOf(this.shutdown)).then(() => true)
      }
      case 'count':
        return this.live.size
      case 'which-children':
        return [...this.live.values()].map((c) => c.ref)
      case 'restart-due': {
        const child = this.waitingRestart.get(message.key)
        if (child === undefined) return undefined
        this.waitingRestart.delete(message.key)
        this.startChild(child)
        return undefined
      }
    }
  }

  async onChildExit (ref: Ref, reason: ExitReason): Promise<void> {
    const child = this.live.get(ref.address)
    if (child === undefined || child.ref !== ref) return
    this.live.delete(ref.address)
    if (this.restart === 'temporary' || (this.restart === 'transient' && !isAbnormal(reason))) return
    if (child.backoff !== undefined) {
      child.backoff.ranFor(this.ctx.system.clock.now() - child.startedAt)
      const key = this.nextKey++
      this.waitingRestart.set(key, child)
      const delayMs = child.backoff.next()
      this.ctx.system.reportRestart({ supervisor: this.self.address, child: ref.address, reason: describeReason(reason), delayMs })
      this.ctx.setTimer(`restart:${key}`, delayMs, { type: 'restart-due', key })
      return
    }
    if (!this.intensity.allow()) {
      await this.stopChildren()
      this.ctx.fail(createError(ErrorCodes.SUPERVISOR_INTENSITY, `${this.self.address}: restart intensity exceeded`))
      return
    }
    this.ctx.system.reportRestart({ supervisor: this.self.address, child: ref.address, reason: describeReason(reason) })
    this.startChild(child)
  }

  /** Stops every child, newest first, by the spec's shutdown setting. */
  async stopChildren (): Promise<void> {
    this.waitingRestart.clear()
    const children = [...this.live.values()].reverse()
    this.live.clear()
    for (const child of children) if (child.ref !== undefined) await this.ctx.stopChild(child.ref, stopTimeoutOf(this.shutdown))
  }

  private startChild (child: DynamicChild<A>): Ref {
    child.startedAt = this.ctx.system.clock.now()
    try {
      child.ref = this.ctx.spawn(() => this.spec.start(child.args), this.spec.spawn?.(child.args))
    } catch (err) {
      // One bad child must not take its siblings down: the caller gets the error, we live on.
      if (isWarrenError(err)) throw err
      throw createError(ErrorCodes.ACTOR_FAILED, `child failed to start: ${err instanceof Error ? err.message : String(err)}`)
    }
    this.live.set(child.ref.address, child)
    return child.ref
  }
}

/** A factory for `system.spawn`: `spawn(createDynamicSupervisor({ child: { start } }))`. */
export function createDynamicSupervisor<A, M = unknown> (options: DynamicSupervisorOptions<A, M>): () => DynamicSupervisor<A, M> {
  return () => new DynamicSupervisor(options)
}
