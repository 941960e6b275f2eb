/**
 * Applying a trajectory's steps to a sandbox, in seq order: commands run again and compared
 * (replay-exec.ts), file changes made again with their recorded bytes, snapshot, pause, resume
 * and egress steps passed over. Pages of the trajectory are read one at a time, so a replay
 * holds one page and one range of bytes whatever the trajectory's length.
 */
import { nanoid } from 'nanoid'
import { nameFromWire, type WireName } from '../../file-names.js'
import { wellFormed } from '../../text.js'
import type { FileRequest, UploadState } from '../sandbox/index.js'
import { TrajectoryDefaults, type RecordedBytes, type Step, type TrajectoryPage } from '../trajectory/index.js'
import { keptWhole, recordedPieces } from './replay-bytes.js'
import { failed, replayExec, type Applied } from './replay-exec.js'
import type { ReplayCompare } from './requests.js'
import { ReplayDefaults, type RunResult, type StepTarget } from './replay-types.js'

/** How a run of steps goes. */
export interface RunOptions {
  /** The first seq applied. */
  fromSeq: number
  /** The last seq applied (all of them when undefined). */
  upTo?: number
  compare: ReplayCompare
  /** A replay stops at the first divergence; a restore goes on (its files come as close as they can) and reports the first. */
  stopAtDivergence: boolean
  /** When the whole run's time is up. */
  deadline: number
}

/** Reads the source trajectory (the tenant's) a page at a time. */
export type PageSource = (fromSeq: number) => Promise<TrajectoryPage>

/**
 * Applies the steps `fromSeq`…`upTo` of a trajectory to the target sandbox.
 * @returns how many were applied, the first divergence, and the seqs skipped
 */
export async function runSteps (pages: PageSource, t: StepTarget, o: RunOptions): Promise<RunResult> {
  const result: RunResult = { steps: 0, divergedAt: null, skipped: [] }
  for (let from = o.fromSeq; ;) {
    const page = await pages(from)
    for (const step of page.steps) {
      if (o.upTo !== undefined && step.seq > o.upTo) return result
      const applied = Date.now() >= o.deadline
        ? { kind: 'diverged' as const, reason: 'timeout' as const, message: `the replay's ${ReplayDefaults.maxMs / 60_000} minutes are up`, fatal: true }
        : await applyStep(t, step, o.compare, o.deadline)
      if (applied.kind === 'skipped' && result.skipped.length < ReplayDefaults.maxSkippedListed) result.skipped.push(step.seq)
      if (applied.kind === 'applied' || applied.kind === 'diverged') result.steps++
      if (applied.kind !== 'diverged') continue
      if (result.divergedAt === null) {
        const { kind: _kind, fatal: _fatal, ...at } = applied
        Object.assign(result, { divergedAt: step.seq, ...at })
      }
      if (o.stopAtDivergence || applied.fatal === true) return result
    }
    if (page.steps.length === 0) return result
    from = page.nextSeq
  }
}

/** Applies one step: a command run again and compared, a file change made again, the rest passed over. */
export async function applyStep (t: StepTarget, step: Step, compare: ReplayCompare, deadline: number): Promise<Applied> {
  switch (step.kind) {
    case 'exec': return await replayExec(t, step, compare, deadline)
    case 'write':
      if (!keptWhole(step.content)) return { kind: 'skipped' }
      return await upload(t, { path: step.path, format: 'file', ...(step.mode !== undefined ? { mode: step.mode } : {}) }, step.content, deadline)
    case 'upload':
      if (!keptWhole(step.content)) return { kind: 'skipped' }
      return await upload(t, { path: step.path, format: 'tar' }, step.content, deadline)
    case 'remove': return await files(t, { op: 'remove', path: step.path, ...(step.recursive === true ? { recursive: true } : {}) })
    case 'rename': return await files(t, { op: 'rename', path: step.from, to: step.to })
    case 'mkdir': return await files(t, { op: 'mkdir', path: step.path, ...(step.mode !== undefined ? { mode: step.mode } : {}), ...(step.parents === true ? { parents: true } : {}) })
    case 'symlink': return await files(t, { op: 'symlink', path: step.path, target: step.target })
    // A snapshot is not cut again, a pause not paused, an egress connection is the command's own doing.
    case 'snapshot':
    case 'pause':
    case 'resume':
    case 'egress':
      return { kind: 'passed' }
  }
}

async function files (t: StepTarget, req: FileRequest): Promise<Applied> {
  try {
    await send(t, req)
    return { kind: 'applied' }
  } catch (err) {
    return failed(err)
  }
}

function send<R> (t: StepTarget, req: FileRequest): Promise<R> {
  return t.send<R>({ type: 'files', req, ...(t.unrecorded ? { unrecorded: true } : {}) }, ReplayDefaults.minStepMs)
}

/**
 * A recorded write (a file) or upload (a tar unpacked at `path`) made again: an upload of the
 * recorded bytes, a range at a time, whose end checks their size and sha256.
 */
async function upload (t: StepTarget, to: { path: WireName, format: 'file' | 'tar', mode?: number }, content: RecordedBytes, deadline: number): Promise<Applied> {
  const id = `replay-${nanoid(16)}`
  try {
    const begun = await send<UploadState>(t, { op: 'write-begin', upload: id, ...to, size: content.bytes })
    let offset = 0
    for await (const data of recordedPieces(content, t.blob, Math.min(begun.maxChunkBytes, TrajectoryDefaults.maxBlobReadBytes))) {
      if (Date.now() >= deadline) {
        await send(t, { op: 'write-abort', upload: id }).catch(() => {})
        return { kind: 'diverged', reason: 'timeout', message: `the replay's time was up ${offset} bytes into ${wellFormed(nameFromWire(to.path))}` }
      }
      await send(t, { op: 'write-chunk', upload: id, offset, data })
      offset += data.length
    }
    await send(t, { op: 'write-end', upload: id, size: content.bytes, sha256: content.sha256 })
    return { kind: 'applied' }
  } catch (err) {
    await send(t, { op: 'write-abort', upload: id }).catch(() => {})
    return failed(err)
  }
}
