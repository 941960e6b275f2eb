/**
 * The session's `replay`: a fresh sandbox (new id, the same tenant, admitted like any create)
 * from a trajectory's header — its spec as recorded, so the same layers and the same hostname,
 * TZ, SOURCE_DATE_EPOCH and WARREN_SEED — and the trajectory's steps applied to it in seq order,
 * each command compared with what it recorded, until the first divergence. The sandbox is kept;
 * its own trajectory records what the replay did.
 */
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxMessage } from '../sandbox/index.js'
import { isLayerDigest } from '../spec-image.js'
import { parseSandboxSpec, SpecDefaults, type SandboxSpec } from '../spec.js'
import type { TrajectoriesMessage, TrajectoryHeader, TrajectoryPage } from '../trajectory/index.js'
import { createRecords, newSandboxIds, type CreateDeps } from './create.js'
import type { SandboxRecord } from './directory.js'
import { toPublicError } from './public-error.js'
import type { ClientRequest, ReplaySpec } from './requests.js'
import { runSteps, type PageSource } from './replay-steps.js'
import { ReplayDefaults, type ReplayResult, type StepTarget } from './replay-types.js'
import { readTrajectory } from './trajectory-requests.js'
import { toView } from './views.js'

export interface ReplayDeps extends CreateDeps {
  trajectories: () => Ref<TrajectoriesMessage>
  /** The tenant's record of a sandbox (NOT_FOUND for another tenant's). */
  record: (id: string) => Promise<SandboxRecord>
}

/** How long one read of the store may take. */
const STORE_TIMEOUT_MS = 30_000

/**
 * The first page of the tenant's trajectory of `id`, with its header (a running sandbox's node
 * is asked first for what it recorded so far).
 * @throws WARREN_ERR_NOT_FOUND naming `id` for a trajectory the tenant has not (another tenant's, an unknown id)
 */
export async function firstPage (d: ReplayDeps, id: string): Promise<TrajectoryPage & { header: TrajectoryHeader }> {
  const page = await readTrajectory({ ...d, refFor: (address) => d.refFor<SandboxMessage>(address) }, { type: 'trajectory', id })
  if (page.header === undefined) throw createError(ErrorCodes.NOT_FOUND, `no trajectory of sandbox ${id} has reached the store yet`, { field: 'id' })
  return page as TrajectoryPage & { header: TrajectoryHeader }
}

/** Pages of the tenant's trajectory of `id`, the first one already read. */
export function pagesOf (d: ReplayDeps, id: string, first: TrajectoryPage): PageSource {
  return async (fromSeq) => fromSeq === 0
    ? first
    : await d.trajectories().ask<TrajectoryPage>({ type: 'read', tenant: d.tenant, sandboxId: id, fromSeq }, { timeoutMs: STORE_TIMEOUT_MS })
}

/**
 * The sandbox at `address` as a replay's target: messages to its actor, bytes from the record
 * blobs of trajectory `sourceId`.
 */
export function targetAt (d: ReplayDeps, sandboxId: string, address: string, sourceId: string, unrecorded: boolean): StepTarget {
  return {
    send: async <R>(message: SandboxMessage, timeoutMs: number): Promise<R> => {
      const ref = d.refFor<SandboxMessage>(address)
      if (ref === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the node of sandbox ${sandboxId} is not connected`, { id: sandboxId, state: 'lost' })
      try {
        return await ref.ask<R>(message, { timeoutMs })
      } catch (err) {
        throw toPublicError(err, sandboxId)
      }
    },
    blob: async (digest, offset, length) => await d.trajectories().ask<Uint8Array>({ type: 'blob', tenant: d.tenant, sandboxId: sourceId, digest, offset, length }, { timeoutMs: STORE_TIMEOUT_MS }),
    unrecorded
  }
}

/**
 * The spec a header recorded, checked again as a create's would be (a trajectory is the node's
 * word), its snapshot layers kept.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `id` when it does not parse
 */
export function recordedSpec (header: TrajectoryHeader): SandboxSpec {
  const { image, snapshot, ...rest } = header.spec
  const diffs = image?.diffs ?? []
  try {
    if (!diffs.every(isLayerDigest)) throw new Error('a snapshot layer is not a digest')
    // Its start was a VM's saved memory, which no step reproduces.
    if ((rest as { memory?: unknown }).memory !== undefined) throw new Error('it started from a memory snapshot')
    const { diffs: _diffs, ...refs } = image ?? { base: '' }
    const spec = parseSandboxSpec({ ...rest, ...(image !== undefined ? { image: refs } : {}) })
    return {
      ...spec,
      ...(spec.image !== undefined && diffs.length > 0 ? { image: { ...spec.image, diffs } } : {}),
      ...(snapshot !== undefined ? { snapshot } : {})
    }
  } catch (err) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `the spec the trajectory of ${header.sandboxId} recorded cannot make a sandbox: ${(err as Error).message}`, { field: 'id' })
  }
}

/** The recorded spec with a replay's labels laid over its own and its TTL. */
function replaySpec (recorded: SandboxSpec, over: ReplaySpec | undefined): SandboxSpec {
  return { ...recorded, labels: { ...recorded.labels, ...over?.labels }, ...(over?.ttlMs !== undefined ? { ttlMs: over.ttlMs } : {}) }
}

/**
 * Replays the tenant's trajectory of `m.id` in a fresh sandbox.
 * @throws WARREN_ERR_NOT_FOUND naming `id` for a trajectory the tenant has not; QUOTA, NO_CAPACITY as a create
 */
export async function replay (d: ReplayDeps, m: Extract<ClientRequest, { type: 'replay' }>): Promise<ReplayResult> {
  const deadline = Date.now() + ReplayDefaults.maxMs
  const first = await firstPage(d, m.id)
  const spec = replaySpec(recordedSpec(first.header), m.spec)
  if (Object.keys(spec.labels).length > SpecDefaults.maxLabels) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `spec.labels would hold more than ${SpecDefaults.maxLabels} labels with the recorded ones`, { field: 'spec.labels' })
  }
  await d.iam().ask({ type: 'admit', tenant: d.tenant, n: 1 })
  const [made] = await createRecords(d, spec, newSandboxIds(1), Date.now() + ReplayDefaults.placementDeadlineMs)
  if (made === undefined || made instanceof Error) throw made ?? new Error('lost outcome')
  const run = await runSteps(pagesOf(d, m.id, first), targetAt(d, made.id, made.address, m.id, false), {
    fromSeq: 0, ...(m.upTo !== undefined ? { upTo: m.upTo } : {}), compare: m.compare ?? 'output', stopAtDivergence: true, deadline
  })
  return { sandbox: toView(await d.record(made.id).catch(() => made)), ...run }
}
