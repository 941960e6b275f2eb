/**
 * Reading trajectories (docs/protocol.md, "Trajectories"): pages of steps, every step in order,
 * and the bytes a step recorded, fetched from the blob store in ranges when they were too many
 * to go inline.
 */
import { TrajectoryDefaults, type RecordedBytes, type Step, type TrajectoryPage } from '../cluster/index.js'
import type { ExecTransport } from './exec.js'

export interface TrajectoryReadOptions {
  /** The first seq to read (0: with the header). */
  fromSeq?: number
  /** Steps at most (the cluster's maximum is 200). */
  limit?: number
}

export const TrajectoryReadDefaults = { timeoutMs: 15_000 }

/** One page of sandbox `id`'s trajectory. */
export async function readTrajectory (t: ExecTransport, id: string, opts: TrajectoryReadOptions): Promise<TrajectoryPage> {
  return await t.request<TrajectoryPage>({
    type: 'trajectory', id, ...(opts.fromSeq !== undefined ? { fromSeq: opts.fromSeq } : {}), ...(opts.limit !== undefined ? { limit: opts.limit } : {})
  }, TrajectoryReadDefaults.timeoutMs)
}

/** Every step of sandbox `id`'s trajectory recorded so far, in order, a page at a time. */
export async function * allSteps (t: ExecTransport, id: string): AsyncGenerator<Step> {
  for (let from = 0; ;) {
    const page = await readTrajectory(t, id, { fromSeq: from })
    for (const step of page.steps) yield step
    if (page.steps.length === 0) return
    from = page.nextSeq
  }
}

/**
 * All the bytes a step recorded: inline, or read from the blob store in ranges.
 * @returns undefined when they were not kept whole (only `head` and `tail`, with the count and sha256)
 */
export async function recordedBytes (t: ExecTransport, id: string, r: RecordedBytes): Promise<Uint8Array | undefined> {
  if (r.data !== undefined) return r.data
  if (r.blob === undefined) return undefined
  const out = new Uint8Array(r.bytes)
  for (let offset = 0; offset < r.bytes;) {
    const length = Math.min(TrajectoryDefaults.maxBlobReadBytes, r.bytes - offset)
    const part = await t.request<Uint8Array>({ type: 'trajectory-blob', id, digest: r.blob, offset, length }, TrajectoryReadDefaults.timeoutMs)
    if (part.length === 0) break
    out.set(part, offset)
    offset += part.length
  }
  return out
}
