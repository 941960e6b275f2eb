/**
 * Pausing a sandbox: its processes frozen by the backend (memory kept), and what the sandbox
 * actor refuses meanwhile. Pause, resume and snapshot calls to the backend run one after the
 * other (`serial`): a snapshot thaws what it froze unless the sandbox was paused, so it must not
 * overlap a pause or a resume. The actor never waits on them; it answers when they are done.
 *
 * Commands are refused from the moment a pause is asked for until a resume has thawed the
 * sandbox, so nothing new starts in a sandbox that is about to freeze, or is not thawed yet.
 */
import type { AdoptedExec, Backend, SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import { SpecDefaults } from '../spec.js'

/** Whether a sandbox runs or is frozen. */
export type FreezeState = 'running' | 'paused'

export interface PauseHost {
  id: string
  backend: Backend
  handle: () => SandboxHandle
  /**
   * The backend has frozen (true) or thawed (false) the sandbox; `frozenMs` is how long it was
   * frozen (at a thaw); `execs`: the resumable commands of a sandbox adopted paused, at its first thaw.
   */
  changed: (paused: boolean, frozenMs: number, execs: AdoptedExec[]) => void
}

export class PauseControl {
  /** What was asked for last. */
  private wanted: FreezeState
  /** What the backend has done: the last pause or resume that succeeded. */
  private actual: FreezeState
  private tail: Promise<unknown> = Promise.resolve()
  /** When the sandbox froze (or its TTL last moved while frozen); undefined while it runs. */
  private since: number | undefined
  /** Pauses and resumes done so far: the control plane takes a change only when it is newer than the one it has. */
  private changes = 0

  /** @param adoptedPaused true for a sandbox found frozen after a node restart */
  constructor (private readonly host: PauseHost, adoptedPaused = false) {
    this.wanted = this.actual = adoptedPaused ? 'paused' : 'running'
    if (adoptedPaused) this.since = Date.now()
  }

  /** True from a pause being asked for until a resume has thawed the sandbox. */
  get paused (): boolean { return this.wanted === 'paused' || this.actual === 'paused' }

  /** True while the backend has it frozen. */
  get frozen (): boolean { return this.actual === 'paused' }

  get seq (): number { return this.changes }

  /**
   * Refuses what a paused sandbox cannot do.
   * @throws WARREN_ERR_SANDBOX_PAUSED with `{ id, state: 'paused' }`
   */
  refuse (what: string): void {
    if (this.paused) throw createError(ErrorCodes.SANDBOX_PAUSED, `sandbox ${this.host.id} is paused: resume it to ${what}`, { id: this.host.id, state: 'paused' })
  }

  /**
   * Freezes the sandbox; pausing one that is paused is not an error. Resolves once it is frozen.
   * @throws WARREN_ERR_UNSUPPORTED naming `backend` when the backend cannot pause
   */
  async pause (): Promise<void> {
    await this.change('paused')
  }

  /**
   * Thaws the sandbox; resuming one that runs is not an error. Resolves once it runs again.
   * @returns how long it was frozen (ms; 0 when it was not)
   */
  async resume (): Promise<number> {
    return await this.change('running')
  }

  private async change (to: FreezeState): Promise<number> {
    const b = this.host.backend
    if (b.snapshots !== true || b.pause === undefined || b.resume === undefined) {
      throw createError(ErrorCodes.UNSUPPORTED, `the ${b.kind} backend cannot pause sandboxes`, { field: 'backend', backend: b.kind })
    }
    this.wanted = to
    return await this.serial(async () => {
      if (this.actual === to) return 0
      let execs: AdoptedExec[] = []
      try {
        if (to === 'paused') await b.pause!(this.host.handle())
        else execs = await b.resume!(this.host.handle()) ?? []
      } catch (err) {
        if (this.wanted === to) this.wanted = this.actual // unless a later request wants it back already
        throw err
      }
      const now = Date.now()
      const frozenMs = to === 'running' ? now - (this.since ?? now) : 0
      this.actual = to
      this.since = to === 'paused' ? now : undefined
      this.changes++
      this.host.changed(to === 'paused', frozenMs, execs)
      return frozenMs
    })
  }

  /** The paused time before `now` no longer counts (a set-ttl while frozen starts its count afresh). */
  restartCount (now: number): void {
    if (this.since !== undefined) this.since = now
  }

  /** Runs `work` after every pause, resume and snapshot asked for before it. */
  serial<T> (work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work)
    this.tail = run.catch(() => {})
    return run
  }
}

/**
 * When the TTL timer of a sandbox should fire. A frozen sandbox whose paused time does not count
 * (`pausedTtl: false`) has no TTL while frozen, but its whole life stays within the cluster's
 * maximum TTL, so it is never kept forever by being paused.
 */
export function ttlDue (o: { expiresAt: number, createdAt: number, frozen: boolean, pausedTtl: boolean | undefined }): number {
  if (o.frozen && o.pausedTtl === false) return o.createdAt + SpecDefaults.maxTtlMs
  return o.expiresAt
}

/**
 * The end of a sandbox after a resume: moved on by the time it was frozen when paused time does
 * not count, within the cluster's maximum TTL from its creation.
 */
export function expiryAfterResume (o: { expiresAt: number, createdAt: number, frozenMs: number, pausedTtl: boolean | undefined }): number {
  if (o.pausedTtl !== false) return o.expiresAt
  return Math.min(o.expiresAt + o.frozenMs, o.createdAt + SpecDefaults.maxTtlMs)
}
