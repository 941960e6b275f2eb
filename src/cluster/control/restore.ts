/**
 * The session's `restore`: a sandbox whose record is lost (its node died) or ended, made again
 * under the same id — from its newest live snapshot, or from its trajectory's header when it has
 * none — with the steps after that snapshot's step (all of them without one) applied again and
 * each command compared. The replayed steps are sent `unrecorded`: the trajectory holds them
 * already, and goes on numbering after them (the create carries the store's next seq). The
 * directory's record comes back to ready on its new node only once every step is applied, as a
 * hibernated sandbox's does at its resume.
 */
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { SandboxMessage } from '../sandbox/index.js'
import { placementRequestOf } from '../spec.js'
import { placeAndCreate, recordFor, type Made } from './create.js'
import { hasEnded, type SandboxRecord } from './directory.js'
import { shardOf } from './registry.js'
import { firstPage, pagesOf, recordedSpec, targetAt, type ReplayDeps } from './replay.js'
import { runSteps, type PageSource } from './replay-steps.js'
import { ReplayDefaults, type RestoreResult } from './replay-types.js'
import type { SnapshotIndexMessage } from './snapshot-index.js'
import type { SnapshotRecord, SnapshotView } from './snapshot-store.js'
import { onSnapshot } from './snapshots.js'
import { toView } from './views.js'

export interface RestoreDeps extends ReplayDeps {
  snapshots: () => Ref<SnapshotIndexMessage>
}

/** How long the store may take to say where a trajectory goes on. */
const NEXT_SEQ_TIMEOUT_MS = 10_000

/** Refuses a restore of a live (or hibernated) sandbox: there is nothing to restore. */
function live (r: SandboxRecord): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, `sandbox ${r.id} is ${r.state}: there is nothing to restore${r.state === 'hibernated' ? ' (resume it)' : ''}`, { field: 'id', state: r.state })
}

/**
 * The seq of the step that recorded snapshot `id`, read page by page (undefined when the
 * trajectory has none: the snapshot's step never reached the store).
 */
async function snapshotStep (pages: PageSource, id: string): Promise<number | undefined> {
  for (let from = 0; ;) {
    const page = await pages(from)
    const step = page.steps.find((s) => s.kind === 'snapshot' && s.snapshot === id)
    if (step !== undefined) return step.seq
    if (page.steps.length === 0) return undefined
    from = page.nextSeq
  }
}

/** The sandbox's newest live snapshot whose step its trajectory holds, its layers leased for the create. */
async function newestSnapshot (d: RestoreDeps, id: string, pages: PageSource): Promise<{ snap: SnapshotRecord, fromSeq: number } | undefined> {
  const [view] = await d.snapshots().ask<SnapshotView[]>({ type: 'list', tenant: d.tenant, sandboxId: id, limit: 1 })
  if (view === undefined) return undefined
  const seq = await snapshotStep(pages, view.id)
  if (seq === undefined) return undefined
  const snap = await d.snapshots().ask<SnapshotRecord>({ type: 'resolve', tenant: d.tenant, ref: view.id }).catch(() => undefined)
  return snap === undefined ? undefined : { snap, fromSeq: seq + 1 }
}

/**
 * Restores the tenant's sandbox `id`.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `id` for a live or hibernated sandbox (or one being
 *   restored); NOT_FOUND naming `id` for one the tenant never had; QUOTA, NO_CAPACITY as a create
 */
export async function restore (d: RestoreDeps, id: string): Promise<RestoreResult> {
  const deadline = Date.now() + ReplayDefaults.maxMs
  const record = await d.record(id).catch((err: unknown) => {
    if (isWarrenError(err, ErrorCodes.NOT_FOUND)) return undefined
    throw err
  })
  if (record !== undefined && !hasEnded(record.state)) throw live(record)
  const first = await firstPage(d, id)
  await d.directory().ask({ type: 'restore-claim', tenant: d.tenant, id })
  let claimed = true
  let leased: string[] | undefined
  try {
    const pages = pagesOf(d, id, first)
    const base = recordedSpec(first.header)
    const from = await newestSnapshot(d, id, pages)
    if (from !== undefined) leased = from.snap.layers
    // A fresh life: the TTL counts from now.
    const spec = from !== undefined ? onSnapshot(base, from.snap) : base
    // Without it the node would start the trajectory over and number its steps again from 0.
    const nextSeq = await d.trajectories().ask<number>({ type: 'next-seq', sandboxId: id }, { timeoutMs: NEXT_SEQ_TIMEOUT_MS })
    await d.iam().ask({ type: 'admit', tenant: d.tenant, n: 1 })
    const [made] = await placeAndCreate(d, spec, [id], Date.now() + ReplayDefaults.placementDeadlineMs, { trajectory: { nextSeq } })
    if (made === undefined || made instanceof Error) {
      d.iam().tell({ type: 'release', tenant: d.tenant, n: 1 })
      throw made ?? new Error('lost outcome')
    }
    const req = placementRequestOf(spec)
    let run
    try {
      run = await runSteps(pages, targetAt(d, id, made.address, id, true), {
        fromSeq: from?.fromSeq ?? 0, compare: 'output', stopAtDivergence: false, deadline
      })
    } catch (err) {
      await undo(d, made, req)
      throw err
    }
    const back = await d.directory().ask<boolean>({ type: 'restored', record: recordFor(d.tenant, made, spec, req) })
    claimed = false
    if (!back) {
      // Its node brought the old one back meanwhile: that one is the sandbox, this one goes.
      await undo(d, made, req)
      throw createError(ErrorCodes.INVALID_ARGUMENT, `sandbox ${id} is live again: there is nothing to restore`, { field: 'id' })
    }
    const { steps, skipped, ...divergence } = run
    return {
      sandbox: toView(await d.record(id)), snapshot: from?.snap.id ?? null, replayed: steps, matched: run.divergedAt === null, skipped, ...divergence
    }
  } finally {
    if (claimed) d.directory().tell({ type: 'restore-release', id })
    if (leased !== undefined) d.snapshots().tell({ type: 'unlease', layers: leased })
  }
}

/** Ends what a restore made and gives back what it held (its node's reservation, the tenant's quota). */
async function undo (d: RestoreDeps, made: Made, req: ReturnType<typeof placementRequestOf>): Promise<void> {
  await d.refFor<SandboxMessage>(made.address)?.ask({ type: 'kill' }, { timeoutMs: 10_000 }).catch(() => {})
  const shards = d.shards()
  shards[shardOf(made.nodeId, shards.length)]!.tell({ type: 'release', nodeId: made.nodeId, req })
  d.iam().tell({ type: 'release', tenant: d.tenant, n: 1 })
}
