/**
 * Replay and restore in the SDK: the requests behind `client.replay()` and `client.restore()`,
 * which wait as long as the cluster lets them run (`ReplayDefaults.maxMs`, 30 minutes) and a
 * margin for the fresh sandbox's placement and create.
 */
import { CreateDefaults, ReplayDefaults, type ReplayCompare, type ReplayResult, type RestoreResult, type SandboxView } from '../cluster/index.js'
import type { ExecTransport } from './exec.js'

export type { DivergenceReason, ReplayCompare, StepOutcome, StreamOutcome } from '../cluster/index.js'

/** What `client.replay()` takes. */
export interface ReplayOptions {
  /** The last seq to apply (all of them when left out). */
  upTo?: number
  /** `output` (the default): each command's exit code and the sha256 of its stdout and stderr; `exit`: its exit code only. */
  compare?: ReplayCompare
  /** The fresh sandbox's labels (laid over the recorded ones) and TTL; the rest is the recorded spec. */
  spec?: { labels?: Record<string, string>, ttlMs?: number }
}

/** A replay's answer, with a handle on the fresh sandbox instead of its view. */
export type Replayed<S> = Omit<ReplayResult, 'sandbox'> & { sandbox: S }
/** A restore's answer, with a handle on the restored sandbox. */
export type Restored<S> = Omit<RestoreResult, 'sandbox'> & { sandbox: S }

export const ReplayClientDefaults = {
  /** A replay's or restore's time: the cluster's bound, its placement and create, and a margin. */
  timeoutMs: ReplayDefaults.maxMs + ReplayDefaults.placementDeadlineMs + CreateDefaults.nodeCreateTimeoutMs + 30_000
}

/** Replays the trajectory of sandbox `id` in a fresh sandbox; `handle` turns its view into the client's handle. */
export async function replayOf<S> (t: ExecTransport, id: string, opts: ReplayOptions, handle: (view: SandboxView) => S): Promise<Replayed<S>> {
  const r = await t.request<ReplayResult>({
    type: 'replay', id,
    ...(opts.upTo !== undefined ? { upTo: opts.upTo } : {}),
    ...(opts.compare !== undefined ? { compare: opts.compare } : {}),
    ...(opts.spec !== undefined ? { spec: opts.spec } : {})
  }, ReplayClientDefaults.timeoutMs)
  return { ...r, sandbox: handle(r.sandbox) }
}

/** Restores sandbox `id` (lost or ended) under its id. */
export async function restoreOf<S> (t: ExecTransport, id: string, handle: (view: SandboxView) => S): Promise<Restored<S>> {
  const r = await t.request<RestoreResult>({ type: 'restore', id }, ReplayClientDefaults.timeoutMs)
  return { ...r, sandbox: handle(r.sandbox) }
}
