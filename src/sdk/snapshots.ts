/**
 * Snapshots in the SDK: the requests behind `sb.snapshot()`, `sb.fork()`, `sb.hibernate()`,
 * `client.snapshots()` and `client.deleteSnapshot()`, with the time each may take in the cluster
 * (a snapshot cuts and pushes a layer; a fork also places and creates its sandboxes).
 */
import { CreateDefaults, LifecycleDefaults, SnapshotDefaults, type ForkOutcome, type SandboxView, type SnapshotView } from '../cluster/index.js'
import { fromWireError, type WarrenError } from '../errors.js'
import type { ExecTransport } from './exec.js'

export type { SnapshotView } from '../cluster/index.js'

/** What `sb.snapshot()` takes. */
export interface SnapshotOptions {
  /** A name (`name:tag`) to create from later (`client.create({ snapshot: name })`); moved from the tenant's snapshot that had it. */
  name?: string
  /**
   * Save the whole VM (microvm sandboxes): its memory and running processes with its files, so
   * sandboxes made from it go on from that instant. Other backends refuse it (UNSUPPORTED naming `memory`).
   */
  memory?: boolean
}

/** What `sb.fork()` takes beside the spec. */
export interface ForkOptions {
  /** Fork from a memory snapshot (microvm): each fork goes on with the sandbox's running processes. */
  memory?: boolean
}

/** Which snapshots `client.snapshots()` lists: the tenant's, newest first. */
export interface SnapshotFilter {
  /** Only those cut from this sandbox. */
  sandboxId?: string
  /** At most this many (the cluster's maximum is 200). */
  limit?: number
}

/** One sandbox of a fork, as the SDK hands it out: made, or why not. */
export type ForkItem<S> = { ok: true, sandbox: S } | { ok: false, error: WarrenError }

/** What `sb.fork()` resolves with. */
export interface ForkResult<S> {
  /** The snapshot the forks were made from (it stays: fork from it again with `client.create({ snapshot: id })`). */
  snapshot: SnapshotView
  /** The sandboxes made, in order. */
  sandboxes: S[]
  /** One outcome per sandbox asked for, in order: some may fail (no capacity) while others are made. */
  outcomes: Array<ForkItem<S>>
}

export const SnapshotClientDefaults = {
  /** A snapshot request's time: the node's cut and push, and a margin. */
  snapshotTimeoutMs: SnapshotDefaults.snapshotTimeoutMs + 10_000,
  /** What a fork adds for placing and creating its sandboxes (beyond its placement deadline). */
  createTimeoutMs: CreateDefaults.nodeCreateTimeoutMs + 10_000,
  /** What a hibernate adds for the sandbox's end on its node. */
  endTimeoutMs: LifecycleDefaults.endWaitMs + LifecycleDefaults.marginMs * 2
}

/** Cuts a snapshot of sandbox `id`. */
export async function snapshotOf (t: ExecTransport, id: string, opts: SnapshotOptions): Promise<SnapshotView> {
  return await t.request<SnapshotView>({ type: 'snapshot', id, ...(opts.name !== undefined ? { name: opts.name } : {}), ...(opts.memory === true ? { memory: true } : {}) }, SnapshotClientDefaults.snapshotTimeoutMs)
}

/** Forks sandbox `id` into `count`; `handle` turns each view into the client's handle. */
export async function forkOf<S> (t: ExecTransport, id: string, count: number, spec: Record<string, unknown> | undefined, handle: (view: SandboxView) => S, opts: ForkOptions = {}): Promise<ForkResult<S>> {
  const { deadlineMs, ...rest } = spec ?? {}
  const wait = typeof deadlineMs === 'number' ? deadlineMs : 10_000
  const answer = await t.request<{ snapshot: SnapshotView, outcomes: ForkOutcome[] }>({
    type: 'fork', id, count, ...(spec !== undefined ? { spec: rest } : {}), ...(deadlineMs !== undefined ? { deadlineMs } : {}), ...(opts.memory === true ? { memory: true } : {})
  }, SnapshotClientDefaults.snapshotTimeoutMs + wait + SnapshotClientDefaults.createTimeoutMs)
  const outcomes = answer.outcomes.map((o): ForkItem<S> => o.ok ? { ok: true, sandbox: handle(o.sandbox) } : { ok: false, error: fromWireError(o.error) })
  return { snapshot: answer.snapshot, outcomes, sandboxes: outcomes.flatMap((o) => o.ok ? [o.sandbox] : []) }
}

/** Hibernates sandbox `id`: its view once hibernated. */
export async function hibernateOf (t: ExecTransport, id: string): Promise<SandboxView> {
  return await t.request<SandboxView>({ type: 'hibernate', id }, SnapshotClientDefaults.snapshotTimeoutMs + SnapshotClientDefaults.endTimeoutMs)
}

/** Resumes sandbox `id` (paused or hibernated): its view once ready. */
export async function resumeOf (t: ExecTransport, id: string): Promise<SandboxView> {
  return await t.request<SandboxView>({ type: 'resume', id }, 10_000 + SnapshotClientDefaults.createTimeoutMs)
}
