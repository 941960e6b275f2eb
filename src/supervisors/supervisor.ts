/**
 * Supervisor: starts its children in order, restarts them by strategy, stops them in reverse.
 *
 * - `one_for_one`: only the child that exited is restarted.
 * - `one_for_all`: every other child is stopped (newest first) and all are started again.
 * - `rest_for_one`: the children started after it are stopped (newest first), then it and they
 *   are started again in order.
 *
 * When restarts exceed the intensity, the supervisor stops all children and fails with
 * `WARREN_ERR_SUPERVISOR_INTENSITY`: its own supervisor decides next.
 */
import { Actor, describeReason, isAbnormal, type ActorFactory, type ExitReason, type Ref } from '../actors/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { createBackoff, type Backoff } from './backoff.js'
import { ChildSpecDefaults, stopTimeoutOf, type ChildSpec, type RestartType, type Shutdown } from './child-spec.js'
import { createRestartIntensity, type IntensityOptions, type RestartIntensity } from './intensity.js'

export type Strategy = 'one_for_one' | 'one_for_all' | 'rest_for_one'

export interface SupervisorOptions {
  strategy?: Strategy
  intensity?: Partial<IntensityOptions>
  children: ChildSpec[]
}

/** What a supervisor answers to `which-children`. */
export interface ChildInfo {
  id: string
  ref: Ref | undefined
  restart: RestartType
}

export type SupervisorMessage =
  | { type: 'which-children' }
  | { type: 'start-child', spec: ChildSpec }
  | { type: 'terminate-child', id: string }
  | { type: 'restart-child', id: string }
  | { type: 'delete-child', id: string }
  | { type: 'restart-due', id: string, generation: number }

interface Child {
  spec: ChildSpec
  restart: RestartType
  shutdown: Shutdown
  ref: Ref | undefined
  startedAt: number
  backoff: Backoff | undefined
  /** Bumped on every (re)start and deliberate stop: a stale restart timer sees a newer number. */
  generation: number
}

export class Supervisor extends Actor<SupervisorMessage> {
  private readonly strategy: Strategy
  private readonly intensity: RestartIntensity
  private readonly kids: Child[] = []

  constructor (private readonly options: SupervisorOptions) {
    super()
    this.strategy = options.strategy ?? 'one_for_one'
    // Time from the actor system's clock, so a supervisor on a virtual clock counts virtual restarts.
    this.intensity = createRestartIntensity(options.intensity, () => this.ctx.system.clock.now())
  }

  preStart (): void {
    for (const spec of this.options.children) this.addChild(spec)
  }

  receive (message: SupervisorMessage): unknown {
    switch (message.type) {
      case 'which-children':
        return this.kids.map((c): ChildInfo => ({ id: c.spec.id, ref: c.ref, restart: c.restart }))
      case 'start-child':
        return this.addChild(message.spec)
      case 'terminate-child':
        return this.terminateChild(this.find(message.id))
      case 'restart-child': {
        const child = this.find(message.id)
        if (child.ref !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `child ${message.id} is running`)
        return this.startChild(child)
      }
      case 'delete-child': {
        const child = this.find(message.id)
        if (child.ref !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `child ${message.id} is running`)
        this.kids.splice(this.kids.indexOf(child), 1)
        return true
      }
      case 'restart-due': {
        const child = this.kids.find((c) => c.spec.id === message.id)
        if (child !== undefined && child.generation === message.generation && child.ref === undefined) this.startChild(child)
        return undefined
      }
    }
  }

  async onChildExit (ref: Ref, reason: ExitReason): Promise<void> {
    const child = this.kids.find((c) => c.ref === ref)
    if (child === undefined) return // stopped on purpose, or already replaced
    child.ref = undefined
    child.generation++
    if (child.restart === 'temporary') {
      this.kids.splice(this.kids.indexOf(child), 1)
      return
    }
    if (child.restart === 'transient' && !isAbnormal(reason)) return

    if (child.backoff !== undefined) {
      child.backoff.ranFor(this.ctx.system.clock.now() - child.startedAt)
      const delayMs = child.backoff.next()
      this.ctx.system.reportRestart({ supervisor: this.self.address, child: child.spec.id, reason: describeReason(reason), delayMs })
      this.ctx.setTimer(`restart:${child.spec.id}`, delayMs, { type: 'restart-due', id: child.spec.id, generation: child.generation })
      return
    }
    if (!this.intensity.allow()) {
      await this.stopChildren()
      this.ctx.fail(createError(ErrorCodes.SUPERVISOR_INTENSITY,
        `${this.self.address}: restart intensity exceeded after ${child.spec.id} exited (${describeReason(reason)})`,
        { child: child.spec.id }))
      return
    }
    const index = this.kids.indexOf(child)
    this.ctx.system.reportRestart({ supervisor: this.self.address, child: child.spec.id, reason: describeReason(reason) })
    switch (this.strategy) {
      case 'one_for_one':
        this.startChild(child)
        break
      case 'one_for_all':
        await this.stopAll(this.kids)
        for (const c of this.kids) if (c.ref === undefined && this.kids.includes(c)) this.startChild(c)
        break
      case 'rest_for_one': {
        const rest = this.kids.slice(index)
        await this.stopAll(rest)
        for (const c of rest) if (c.ref === undefined && this.kids.includes(c)) this.startChild(c)
        break
      }
    }
  }

  /** Stops every child, newest first, each by its own shutdown setting. */
  async stopChildren (): Promise<void> {
    await this.stopAll(this.kids)
  }

  private async stopAll (children: Child[]): Promise<void> {
    for (const child of [...children].reverse()) {
      if (child.ref === undefined) continue
      const ref = child.ref
      child.ref = undefined // its exit signal will find no match and be ignored
      child.generation++
      await this.ctx.stopChild(ref, stopTimeoutOf(child.shutdown))
      if (child.restart === 'temporary') this.kids.splice(this.kids.indexOf(child), 1)
    }
  }

  private addChild (spec: ChildSpec): Ref {
    if (this.kids.some((c) => c.spec.id === spec.id)) {
      throw createError(ErrorCodes.DUPLICATE_NAME, `a child with id ${spec.id} exists`, { id: spec.id })
    }
    const child: Child = {
      spec,
      restart: spec.restart ?? ChildSpecDefaults.restart,
      shutdown: spec.shutdown ?? ChildSpecDefaults.shutdown,
      ref: undefined,
      startedAt: 0,
      backoff: spec.backoff !== undefined ? createBackoff(spec.backoff) : undefined,
      generation: 0
    }
    this.kids.push(child)
    return this.startChild(child)
  }

  private startChild (child: Child): Ref {
    child.generation++
    child.startedAt = this.ctx.system.clock.now()
    child.ref = this.ctx.spawn(child.spec.start as ActorFactory, child.spec.spawn)
    return child.ref
  }

  private async terminateChild (child: Child): Promise<boolean> {
    await this.stopAll([child])
    return true
  }

  private find (id: string): Child {
    const child = this.kids.find((c) => c.spec.id === id)
    if (child === undefined) throw createError(ErrorCodes.NOT_FOUND, `no child with id ${id}`, { id })
    return child
  }
}

/** A factory for `system.spawn` / a parent's child spec: `spawn(createSupervisor({...}))`. */
export function createSupervisor (options: SupervisorOptions): ActorFactory<SupervisorMessage> {
  return () => new Supervisor(options)
}
