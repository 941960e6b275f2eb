/**
 * The session's snapshot requests: snapshot, fork, hibernate, the resume of a hibernated
 * sandbox, and a create's `spec.snapshot`. A snapshot is the sandbox's writes cut into a layer
 * on its node and pushed to the blob store; the control plane records the whole stack (the
 * sandbox's layers, then the new one), so a sandbox made from it is an ordinary create with a
 * longer stack, placed, cached and loaded on demand like an image. Fork is "snapshot once,
 * create n"; hibernate is "snapshot, then end it on its node, keeping its record".
 *
 * A memory snapshot (microvm, `memory: true`) adds no layer: its blob is the VM's saved state
 * (RAM, the writable layer inside it, devices), kept in the record's spec as `memory` beside the
 * sandbox's own stack and listed with its layers (so leases and the collector cover it). A
 * sandbox made from it goes on from that instant, its processes running; its machine (backend,
 * vCPUs, memory) is the saved one's and cannot be changed.
 */
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes, toWireError, type WireError } from '../../errors.js'
import type { SandboxMessage, SnapshotResult } from '../sandbox/index.js'
import { isPlainObject, bad } from '../spec-fields.js'
import { ImageRefDefaults } from '../spec-image.js'
import { parseSandboxSpec, placementRequestOf, type SandboxSpec } from '../spec.js'
import { placeAndCreate, createRecords, newSandboxIds, type CreateDeps } from './create.js'
import { hasEnded, type SandboxRecord } from './directory.js'
import { SnapshotDefaults, type SnapshotIndexMessage } from './snapshot-index.js'
import { shardOf } from './registry.js'
import { newSnapshotId, toSnapshotView, type SnapshotRecord, type SnapshotView } from './snapshot-store.js'
import { toView, type SandboxView } from './views.js'

export interface SnapshotDeps extends CreateDeps {
  snapshots: () => Ref<SnapshotIndexMessage>
  /** The tenant's record of a sandbox (NOT_FOUND for another tenant's). */
  record: (id: string) => Promise<SandboxRecord>
  /** A message to the sandbox's actor, once the record says it can take one (the session's forward). */
  forward: <R>(id: string, message: SandboxMessage, timeoutMs: number) => Promise<R>
  /** The seq a sandbox's trajectory goes on from, when the cluster keeps trajectories. */
  nextSeq?: (id: string) => Promise<number | undefined>
}

/** One sandbox of a fork: made, or why not. */
export type ForkOutcome = { ok: true, sandbox: SandboxView } | { ok: false, error: WireError }

/** Backends whose file system snapshots are EROFS layers the other stacks too (both mount the same layers). */
const LAYERED_BACKENDS: readonly string[] = ['container', 'microvm']

/** Spec fields that are maps: a create from a snapshot merges them key by key; any other field it gives replaces the snapshot's. */
const MERGED_FIELDS = ['labels', 'env', 'limits']

/** The refusal of what a hibernated sandbox cannot do before it resumes (exec, files, pause, snapshot). */
export function hibernatedError (r: SandboxRecord): Error {
  return createError(ErrorCodes.SANDBOX_PAUSED, `sandbox ${r.id} is hibernated: resume it first`, { id: r.id, state: r.state })
}

/**
 * Lays the fields a client gave over a sandbox's spec: the snapshot's spec for a create from it,
 * the source sandbox's for a fork. Only what the client sent counts (defaults are not laid over).
 * @returns the spec, without image and snapshot (the caller sets them from the snapshot)
 * @throws WARREN_ERR_BAD_SPEC naming the field; `image` beside a snapshot, another `backend`
 */
export function overlaySpec (base: SandboxSpec, raw: unknown, memory = base.memory !== undefined): SandboxSpec {
  if (raw === undefined || raw === null) raw = {}
  if (!isPlainObject(raw)) bad('', 'must be an object')
  if (raw.image !== undefined) bad('image', 'cannot be given beside snapshot: the snapshot holds the layers')
  if (raw.backend !== undefined && raw.backend !== base.backend) {
    // A file system snapshot is an EROFS layer either backend stacks; a memory snapshot is a VM's machine state.
    if (memory) bad('backend', `must be the memory snapshot's backend (${base.backend}): its machine state restores in a VM alone`)
    if (!LAYERED_BACKENDS.includes(base.backend) || !LAYERED_BACKENDS.includes(raw.backend as string)) bad('backend', `must be the snapshot's backend (${base.backend})${LAYERED_BACKENDS.includes(base.backend) ? ` or another of ${LAYERED_BACKENDS.join(', ')}` : ''}`)
  }
  if (memory && raw.limits !== undefined) bad('limits', 'cannot be given beside a memory snapshot: the VM goes on with the machine it was saved from')
  const { image: _image, snapshot: _snapshot, memory: _memory, ...merged } = base as SandboxSpec & Record<string, unknown>
  for (const [k, v] of Object.entries(raw)) {
    const was = merged[k]
    merged[k] = MERGED_FIELDS.includes(k) && isPlainObject(v) && isPlainObject(was) ? { ...was, ...v } : v
  }
  return parseSandboxSpec(merged)
}

/** A spec over a snapshot: its stack as the image, its saved machine state (a memory snapshot's), its id as `snapshot`. */
export function onSnapshot (spec: SandboxSpec, snap: SnapshotRecord): SandboxSpec {
  const { snapshot: _ref, memory: _memory, ...rest } = spec
  return {
    ...rest, ...(snap.spec.image !== undefined ? { image: snap.spec.image } : {}),
    ...(snap.spec.memory !== undefined ? { memory: snap.spec.memory } : {}), snapshot: snap.id
  }
}

/** The layers a create from a spec leases from the collector: its stack, and a memory snapshot's state. */
export function leasedLayers (spec: SandboxSpec): string[] {
  const layers = placementRequestOf(spec).layers
  return spec.memory !== undefined ? [...layers, spec.memory.state] : layers
}

/**
 * The spec of a create naming `spec.snapshot`: the snapshot's own spec, with the fields the
 * create gave laid over it.
 * @throws WARREN_ERR_BAD_SPEC naming `snapshot` for one the tenant has not (unknown, deleted, another tenant's: one answer)
 */
export async function specFromSnapshot (d: SnapshotDeps, raw: Record<string, unknown>): Promise<SandboxSpec> {
  // The reference's form first, as the spec parser checks it.
  parseSandboxSpec({ snapshot: raw.snapshot, backend: 'container' })
  if (raw.image !== undefined) bad('image', 'cannot be given beside snapshot: the snapshot holds the layers')
  const snap = await d.snapshots().ask<SnapshotRecord>({ type: 'resolve', tenant: d.tenant, ref: raw.snapshot as string })
  return onSnapshot(overlaySpec(snap.spec, raw), snap)
}

/**
 * Cuts a snapshot of a sandbox: its stack (`busybox` for a container with no image), then the
 * new layer; a stack at `maxDiffs` diffs is flattened into one layer instead. With `memory`
 * (microvm), its saved machine state on its own stack instead (see the file's head).
 * @throws WARREN_ERR_UNSUPPORTED naming `backend` for a function sandbox, naming `memory` for a backend that cannot save memory; QUOTA when the tenant has its most snapshots
 */
export async function takeSnapshot (d: SnapshotDeps, r: SandboxRecord, name?: string, memory = false): Promise<SnapshotRecord> {
  if (r.backend === 'function') throw createError(ErrorCodes.UNSUPPORTED, 'a function sandbox has no file system to snapshot', { field: 'backend', backend: r.backend })
  if (memory && r.backend !== 'microvm') throw createError(ErrorCodes.UNSUPPORTED, `a ${r.backend} sandbox has no machine state to snapshot: memory snapshots are microvm's`, { field: 'memory', backend: r.backend })
  const { flatten } = await d.snapshots().ask<{ flatten: boolean }>({ type: 'plan', tenant: d.tenant, spec: r.spec })
  // Named before it is cut, so the sandbox's trajectory records the snapshot by its id.
  const id = newSnapshotId()
  const cut = await d.forward<SnapshotResult>(r.id, { type: 'snapshot', snapshot: id, ...(memory ? { memory } : flatten ? { flatten } : {}) }, SnapshotDefaults.snapshotTimeoutMs)
  const image = r.spec.image ?? { base: ImageRefDefaults.builtinBase }
  const stacked = { ...image, diffs: [...(image.diffs ?? []), cut.layer] }
  // A memory snapshot keeps the sandbox's own stack: the VM restored from it reads the same disks.
  const stack = cut.memory !== undefined ? image : cut.flattened ? { base: cut.layer } : stacked
  // A sandbox made from a memory snapshot has its own state now: its snapshots do not carry the old one.
  const { snapshot: parent, memory: _was, ...source } = r.spec
  const state = cut.memory !== undefined ? { memory: { state: cut.layer, ...cut.memory } } : {}
  const spec: SandboxSpec = { ...source, image: stack, ...state }
  const record: SnapshotRecord = {
    id, tenant: d.tenant, sandboxId: r.id, backend: r.backend, bytes: cut.bytes, createdAt: Date.now(),
    spec, layers: leasedLayers(spec),
    ...(name !== undefined ? { name } : {}),
    ...(parent !== undefined ? { parent } : {})
  }
  await d.snapshots().ask<SnapshotView>({ type: 'put', record })
  return record
}

/**
 * Forks a sandbox: one snapshot, then `count` sandboxes from it in one request, each with its
 * own outcome (some may be made when others find no room). The quota of all `count` is
 * admitted first, all or nothing: a fork the quota cannot hold is refused whole (QUOTA) before
 * any snapshot is cut. A fork that made none is refused with the first one's error, its snapshot deleted.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `count`; BAD_SPEC naming a field of `spec`
 */
export async function fork (d: SnapshotDeps, m: { id: string, count: number, spec?: unknown, memory?: boolean }, deadline: number): Promise<{ snapshot: SnapshotView, outcomes: ForkOutcome[] }> {
  const r = await d.record(m.id)
  if (m.spec !== undefined && isPlainObject(m.spec) && m.spec.snapshot !== undefined) bad('snapshot', 'cannot be given to a fork: it forks from its own snapshot')
  // The spec is checked against the sandbox's before anything is cut or admitted (as over a memory snapshot, when it is one).
  const spec = overlaySpec(r.spec, m.spec, m.memory === true)
  await d.iam().ask({ type: 'admit', tenant: d.tenant, n: m.count })
  let snap: SnapshotRecord
  try {
    snap = await takeSnapshot(d, r, undefined, m.memory === true)
  } catch (err) {
    d.iam().tell({ type: 'release', tenant: d.tenant, n: m.count })
    throw err
  }
  const made = await createRecords(d, onSnapshot(spec, snap), newSandboxIds(m.count), deadline)
  if (made.every((o) => o instanceof Error)) {
    // Nothing was made from it (no node could hold the spec): the snapshot would only be left over.
    await d.snapshots().ask({ type: 'delete', tenant: d.tenant, ref: snap.id }).catch(() => {})
    throw made[0] as Error
  }
  return {
    snapshot: toSnapshotView(snap),
    outcomes: made.map((o): ForkOutcome => o instanceof Error ? { ok: false, error: toWireError(o) } : { ok: true, sandbox: toView(o) })
  }
}

/**
 * Hibernates a sandbox: a snapshot, then its end on its node; its record stays, `hibernated`,
 * holding no node, reservation or quota, until a resume, a kill or its TTL. A hibernated one
 * answers as it is.
 * @throws WARREN_ERR_SANDBOX_GONE when it ended meanwhile (a kill won)
 */
export async function hibernate (d: SnapshotDeps, id: string, deadline = Date.now() + HIBERNATE_WAIT_MS): Promise<SandboxView> {
  for (;;) {
    const r = await d.record(id)
    // Sent again (after a lost answer), it answers the state it reached.
    if (r.state === 'hibernated') return toView(r)
    if (hasEnded(r.state)) throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${id} is ${r.state}`, { id, state: r.state })
    // Sent twice at once (a retry, two workers): one cuts the snapshot, the other waits for what it became.
    if (await d.directory().ask<boolean>({ type: 'hibernate-claim', tenant: d.tenant, id })) {
      try {
        return await hibernateClaimed(d, r)
      } finally {
        d.directory().tell({ type: 'hibernate-release', id })
      }
    }
    if (Date.now() >= deadline) throw createError(ErrorCodes.TIMEOUT, `sandbox ${id} was still being hibernated by another request at the deadline`, { id })
    await lookAgainSoon()
  }
}

/** How long a hibernate waits for another request's hibernate of the same sandbox. */
const HIBERNATE_WAIT_MS = 120_000

async function hibernateClaimed (d: SnapshotDeps, r: SandboxRecord): Promise<SandboxView> {
  const id = r.id
  const snap = await takeSnapshot(d, r)
  try {
    await d.directory().ask({ type: 'hibernating', tenant: d.tenant, id, snapshot: snap.id })
  } catch (err) {
    await d.snapshots().ask({ type: 'delete', tenant: d.tenant, ref: snap.id }).catch(() => {})
    throw err
  }
  await d.refFor<SandboxMessage>(r.address)?.ask({ type: 'kill' }, { timeoutMs: 10_000 }).catch(() => {})
  const [after] = await d.directory().ask<Array<SandboxRecord | undefined>>({ type: 'await-end', tenant: d.tenant, ids: [id], timeoutMs: 60_000 }, { timeoutMs: 65_000 })
  if (after?.state !== 'hibernated') {
    // Killed meanwhile: nothing will resume from the snapshot, which the tenant did not ask for.
    await d.snapshots().ask({ type: 'delete', tenant: d.tenant, ref: snap.id }).catch(() => {})
    const state = after?.state ?? 'gone'
    throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${id} is ${state}: it ended before it could hibernate`, { id, state })
  }
  return toView(after)
}

/**
 * Resumes a hibernated sandbox: quota admitted, placed, and created again from its snapshot
 * under the same id, to end when it would have (its `expiresAt`). Its files are as they were;
 * its processes are not (they ended with it).
 * @throws WARREN_ERR_SANDBOX_GONE when it was killed meanwhile; QUOTA, NO_CAPACITY as a create
 */
export async function resumeHibernated (d: SnapshotDeps, r: SandboxRecord, deadline: number): Promise<SandboxView> {
  // Its life ran out while it slept: not made again for moments. The directory's sweep ends it,
  // now rather than at its next round, so what `info` says next agrees with this answer.
  if (r.expiresAt <= Date.now()) {
    await d.directory().ask({ type: 'sweep' }).catch(() => {})
    throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${r.id} reached its TTL while hibernated`, { id: r.id, state: 'gone', reason: 'ttl' })
  }
  // Sent twice (a retry, two workers): one of them makes it, the other answers what it became.
  if (!await d.directory().ask<boolean>({ type: 'resume-claim', tenant: d.tenant, id: r.id })) return await resumedByAnother(d, r.id, deadline)
  try {
    return await makeResumed(d, r, deadline)
  } finally {
    d.directory().tell({ type: 'resume-release', id: r.id })
  }
}

/** How often a hibernate or resume that another request is making is looked at, whether it is done. */
const LOOK_AGAIN_MS = 100
const lookAgainSoon = async (): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, LOOK_AGAIN_MS)) }

/**
 * The sandbox once another request's resume of it is done: its view when it runs again.
 * @throws WARREN_ERR_SANDBOX_GONE when it ended instead; WARREN_ERR_TIMEOUT at the deadline
 */
async function resumedByAnother (d: SnapshotDeps, id: string, deadline: number): Promise<SandboxView> {
  for (;;) {
    const now = await d.record(id)
    if (now.state !== 'hibernated') {
      if (now.state === 'ready' || now.state === 'paused') return toView(now)
      throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${id} is ${now.state}: it ended while another request resumed it`, { id, state: now.state })
    }
    if (Date.now() >= deadline) throw createError(ErrorCodes.TIMEOUT, `sandbox ${id} was still being resumed by another request at the deadline`, { id })
    await lookAgainSoon()
  }
}

async function makeResumed (d: SnapshotDeps, r: SandboxRecord, deadline: number): Promise<SandboxView> {
  const snap = await d.snapshots().ask<SnapshotRecord | undefined>({ type: 'get-any', id: r.snapshot! })
  if (snap === undefined) throw createError(ErrorCodes.INTERNAL, `the snapshot ${String(r.snapshot)} of hibernated sandbox ${r.id} is missing`)
  const spec = onSnapshot({ ...r.spec, ttlMs: Math.max(1, r.expiresAt - Date.now()) }, snap)
  const nextSeq = await d.nextSeq?.(r.id)
  await d.iam().ask({ type: 'admit', tenant: d.tenant, n: 1 })
  const [made] = await placeAndCreate(d, spec, [r.id], deadline, nextSeq !== undefined ? { trajectory: { nextSeq } } : {})
  if (made instanceof Error || made === undefined) {
    d.iam().tell({ type: 'release', tenant: d.tenant, n: 1 })
    throw made ?? new Error('lost outcome')
  }
  const req = placementRequestOf(spec)
  const back = await d.directory().ask<boolean>({ type: 'resumed', tenant: d.tenant, id: r.id, nodeId: made.nodeId, address: made.address, spec, req })
  if (!back) {
    // Killed (or resumed by another request) while this one was on its way: what it made goes.
    await d.refFor<SandboxMessage>(made.address)?.ask({ type: 'kill' }, { timeoutMs: 10_000 }).catch(() => {})
    const shards = d.shards()
    shards[shardOf(made.nodeId, shards.length)]!.tell({ type: 'release', nodeId: made.nodeId, req })
    d.iam().tell({ type: 'release', tenant: d.tenant, n: 1 })
    const now = await d.record(r.id).catch(() => undefined)
    throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${r.id} is no longer hibernated`, { id: r.id, state: now?.state ?? 'gone' })
  }
  return toView(await d.record(r.id))
}
