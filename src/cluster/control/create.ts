/**
 * The core of every create a session makes — a plain create, a fork's sandboxes, a hibernated
 * sandbox resuming: place each sandbox of one spec, send one create per node for all its items,
 * and answer one outcome per sandbox. Whether a batch is all or nothing is the caller's choice
 * (a plain create is; a fork is not), so this core never undoes what it made.
 */
import { customAlphabet } from 'nanoid'
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes, fromWireError, toWireError, type WarrenError } from '../../errors.js'
import type { ControlMetrics } from '../metrics/index.js'
import type { IamMessage } from '../iam/index.js'
import type { CreateItem, CreateOutcome, NodeMessage } from '../node/index.js'
import { placeBatch, type PlacementRequest, type ShardMessage } from '../placement/index.js'
import { placementRequestOf, type SandboxSpec } from '../spec.js'
import type { DirectoryMessage, SandboxRecord } from './directory.js'
import { nodeCreateError } from './public-error.js'
import { shardForSandbox, shardOf } from './registry.js'
import type { CreationSeries } from './creation-series.js'

export const CreateDefaults = {
  /** Time a node gets to create a batch. */
  nodeCreateTimeoutMs: 60_000,
  /** What a placement ask adds to the time left before its deadline. */
  placementMarginMs: 5000
}

export interface CreateDeps {
  tenant: string
  iam: () => Ref<IamMessage>
  shards: () => Ref<ShardMessage>[]
  directory: () => Ref<DirectoryMessage>
  /** A ref for an address in the cluster (a node's agent), or undefined when its node is not connected. */
  refFor: <M>(address: string) => Ref<M> | undefined
  /** Where each outcome is counted for the page's charts. */
  creations?: CreationSeries
  /** Counts each sandbox made (with its time and warm/cold start) or not made (with its code). */
  metrics?: ControlMetrics
}

/** A sandbox made on a node. */
export interface Made { id: string, nodeId: string, address: string }

const newId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 16)

/** `count` fresh sandbox ids (16 of [0-9a-z]). */
export function newSandboxIds (count: number): string[] {
  return Array.from({ length: count }, () => newId())
}

/**
 * Places and creates one sandbox per id, all of one spec. What a node could not make gives its
 * reservation back here; quota is the caller's.
 * @param extra fields every create item carries beside id, tenant and spec (a resume's trajectory)
 * @returns one outcome per id, in order: where it runs, or why it was not made
 */
export async function placeAndCreate (d: CreateDeps, spec: SandboxSpec, ids: string[], deadline: number, extra: Partial<CreateItem> = {}): Promise<Array<Made | Error>> {
  const req = placementRequestOf(spec)
  const shards = d.shards()
  const started = Date.now()
  const placed = await Promise.allSettled(placeBatch(
    ids.map((id) => ({ shard: shards[shardForSandbox(req, id, shards.length)]!, req, deadline })),
    (dl) => Math.max(1, dl - Date.now() + CreateDefaults.placementMarginMs)))

  // Group by node: one create message per node, whatever the batch size.
  const byNode = new Map<string, CreateItem[]>()
  const outcomes = new Map<string, Made | Error>()
  placed.forEach((p, i) => {
    const id = ids[i]!
    if (p.status === 'rejected') { outcomes.set(id, p.reason as Error); d.creations?.record(0, 1, Date.now() - started); d.metrics?.createFailed(spec.backend, (p.reason as WarrenError).code); return }
    let items = byNode.get(p.value.nodeId)
    if (items === undefined) { items = []; byNode.set(p.value.nodeId, items) }
    items.push({ ...extra, id, tenant: d.tenant, spec })
  })
  await Promise.all([...byNode].map(async ([nodeId, items]) => {
    let results: CreateOutcome[]
    try {
      const agent = d.refFor<NodeMessage>(`${nodeId}/agent`)
      if (agent === undefined) throw createError(ErrorCodes.NO_CAPACITY, `node ${nodeId} is not connected`)
      results = await agent.ask<CreateOutcome[]>({ type: 'create', items }, { timeoutMs: CreateDefaults.nodeCreateTimeoutMs })
    } catch (err) {
      const error = toWireError(nodeCreateError(err, nodeId, CreateDefaults.nodeCreateTimeoutMs))
      results = items.map((it) => ({ id: it.id, error }))
    }
    const failed = results.filter((r) => 'error' in r).length
    d.creations?.record(results.length - failed, failed, Date.now() - started)
    for (const r of results) {
      if ('error' in r) {
        outcomes.set(r.id, fromWireError(r.error))
        d.metrics?.createFailed(spec.backend, r.error.code)
        shards[shardOf(nodeId, shards.length)]!.tell({ type: 'release', nodeId, req })
      } else {
        outcomes.set(r.id, { id: r.id, nodeId, address: r.address })
        d.metrics?.created(spec.backend, r.warm === true, (Date.now() - started) / 1000)
      }
    }
  }))
  return ids.map((id) => outcomes.get(id) ?? new Error('lost outcome'))
}

/**
 * Creates sandboxes whose quota the caller admitted: the quota of those not made goes back, and
 * the directory records those made.
 * @returns one outcome per id, in order: the new record, or why it was not made
 */
export async function createRecords (d: CreateDeps, spec: SandboxSpec, ids: string[], deadline: number): Promise<Array<SandboxRecord | Error>> {
  const made = await placeAndCreate(d, spec, ids, deadline)
  const req = placementRequestOf(spec)
  const out = made.map((m) => m instanceof Error ? m : recordFor(d.tenant, m, spec, req))
  const records = out.filter((o): o is SandboxRecord => !(o instanceof Error))
  const failed = ids.length - records.length
  if (failed > 0) d.iam().tell({ type: 'release', tenant: d.tenant, n: failed })
  if (records.length > 0) d.directory().tell({ type: 'add', records })
  return out
}

/** The directory's record of a sandbox just made. */
export function recordFor (tenant: string, m: Made, spec: SandboxSpec, req: PlacementRequest): SandboxRecord {
  const now = Date.now()
  return { id: m.id, tenant, nodeId: m.nodeId, address: m.address, state: 'ready', backend: spec.backend, labels: spec.labels, createdAt: now, expiresAt: now + spec.ttlMs, req, spec }
}
