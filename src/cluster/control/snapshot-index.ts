/**
 * SnapshotIndex: the control plane's actor over the snapshot store (snapshot-store.ts) — the
 * one writer of the table — and the garbage collector of snapshot layers.
 *
 * A deleted snapshot's layers leave the blob store once nothing needs them: no live snapshot
 * lists them, no live or hibernated sandbox stacks them (the directory says which), and no create
 * that resolved a snapshot in the last minutes is still on its way to a node (a lease per layer).
 * Only layers recorded as kind `snapshot` are ever removed: a snapshot's stack also lists the
 * operator's base and tool layers, which are the image index's, never the collector's.
 */
import { rmSync } from 'node:fs'
import { Actor, type Ref } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { storePaths } from '../../images/blob/index.js'
import type { LayerKinds } from '../../images/index.js'
import type { SandboxSpec } from '../spec.js'
import type { DirectoryMessage } from './directory.js'
import { toSnapshotView, type SnapshotRecord, type SnapshotStore } from './snapshot-store.js'

export const SnapshotDefaults = {
  /**
   * Diffs a stack may hold: a snapshot of a sandbox whose stack has this many already is
   * flattened into one layer, so a chain of forks never stacks more than this many overlays.
   */
  maxDiffs: 8,
  /** Live snapshots one tenant may keep (beyond it a snapshot is refused with QUOTA). */
  maxPerTenant: 10_000,
  /** Snapshots one `snapshots` request lists at most, and by default (a view is up to ~2 KiB: pages fit a frame). */
  maxList: 200,
  defaultList: 50,
  /** How long a node may take to cut and push a snapshot layer. */
  snapshotTimeoutMs: 120_000,
  /** How often the collector sweeps (it also runs after each delete). */
  gcEveryMs: 60_000,
  /** Deleted snapshots one sweep looks at. */
  gcBatch: 1000,
  /**
   * How long a create that resolved a snapshot keeps its layers from the collector: its whole
   * way to a node (the longest placement deadline and the node's create time, with margin).
   */
  leaseMs: 190_000
}

export type SnapshotTunables = Pick<typeof SnapshotDefaults, 'maxDiffs' | 'maxPerTenant' | 'gcEveryMs'>

export type SnapshotIndexMessage =
  /** Whether a snapshot of a sandbox of this spec flattens; refused (QUOTA) when the tenant has no room for one more. */
  | { type: 'plan', tenant: string, spec: SandboxSpec }
  | { type: 'put', record: SnapshotRecord }
  /** A live snapshot of the tenant by id or name, its layers leased for a create; BAD_SPEC naming `snapshot` when there is none. */
  | { type: 'resolve', tenant: string, ref: string }
  /** The create that resolved a snapshot is done (its sandboxes are in the directory, or were not made): its lease ends. */
  | { type: 'unlease', layers: string[] }
  /** A snapshot by id, deleted or not (a hibernated sandbox's own); undefined when purged. */
  | { type: 'get-any', id: string }
  | { type: 'list', tenant: string, sandboxId?: string, limit?: number }
  | { type: 'delete', tenant: string, ref: string }
  /** Runs the collector now; answers the digests it removed. */
  | { type: 'gc' }

export interface SnapshotIndexOptions {
  store: SnapshotStore
  kinds?: LayerKinds
  /** The blob store's root; without one there is nothing to collect. */
  blobRoot?: string
  directory: () => Ref<DirectoryMessage>
  tunables?: Partial<SnapshotTunables>
}

export class SnapshotIndex extends Actor<SnapshotIndexMessage> {
  private readonly t: SnapshotTunables
  /**
   * Layer → creates on their way that stack it, and until when the newest may still be (a create
   * that never says it is done lets go then). One entry per layer: bounded by the layers that exist.
   */
  private readonly leases = new Map<string, { n: number, until: number }>()
  private collecting: Promise<string[]> | undefined
  private again = false

  constructor (private readonly o: SnapshotIndexOptions) {
    super()
    this.t = { ...SnapshotDefaults, ...o.tunables }
  }

  preStart (): void {
    this.ctx.setTimer('gc', this.t.gcEveryMs, { type: 'gc' }, { repeat: true })
  }

  receive (m: SnapshotIndexMessage): unknown {
    const store = this.o.store
    switch (m.type) {
      case 'plan': {
        const n = store.count(m.tenant)
        if (n >= this.t.maxPerTenant) {
          throw createError(ErrorCodes.QUOTA, `tenant ${m.tenant} has ${n} snapshots, the most it may keep: delete some first`, { quota: 'snapshots', max: this.t.maxPerTenant })
        }
        return { flatten: (m.spec.image?.diffs?.length ?? 0) >= this.t.maxDiffs }
      }
      case 'put':
        store.put(m.record)
        return toSnapshotView(m.record)
      case 'resolve': {
        const r = store.get(m.tenant, m.ref)
        // Another tenant's snapshot answers exactly like one that never was.
        if (r === undefined) throw createError(ErrorCodes.BAD_SPEC, `spec.snapshot: no snapshot ${m.ref}`, { field: 'snapshot' })
        const until = Date.now() + SnapshotDefaults.leaseMs
        for (const l of r.layers) this.leases.set(l, { n: (this.leases.get(l)?.n ?? 0) + 1, until })
        return r
      }
      case 'unlease':
        for (const l of m.layers) {
          const lease = this.leases.get(l)
          if (lease !== undefined && --lease.n <= 0) this.leases.delete(l)
        }
        return undefined
      case 'get-any':
        return store.getAny(m.id)
      case 'list': {
        const limit = Math.min(m.limit ?? SnapshotDefaults.defaultList, SnapshotDefaults.maxList)
        return store.list(m.tenant, limit, m.sandboxId).map(toSnapshotView)
      }
      case 'delete': {
        const r = store.delete(m.tenant, m.ref)
        if (r === undefined) throw createError(ErrorCodes.NOT_FOUND, `no snapshot ${m.ref}`, { field: 'id' })
        void this.collect().catch(() => {})
        return { id: r.id, deleted: true }
      }
      case 'gc':
        return this.ctx.answerLater(this.collect())
    }
  }

  /** One sweep at a time; a sweep asked for while one runs runs once more after it. */
  private async collect (): Promise<string[]> {
    if (this.collecting !== undefined) {
      this.again = true
      return await this.collecting
    }
    this.collecting = this.sweep()
    try {
      return await this.collecting
    } finally {
      this.collecting = undefined
      if (this.again) { this.again = false; void this.collect().catch(() => {}) }
    }
  }

  private async sweep (): Promise<string[]> {
    const store = this.o.store
    const deleted = store.deleted(SnapshotDefaults.gcBatch)
    if (deleted.length === 0) return []
    const inUse = await this.o.directory().ask<{ layers: string[], snapshots: string[] }>({ type: 'in-use' }, { timeoutMs: 30_000 })
    const used = new Set(inUse.layers)
    const resumedFrom = new Set(inUse.snapshots)
    // Read after the directory answered: a snapshot made meanwhile is counted.
    const live = store.liveLayers()
    const now = Date.now()
    for (const [l, lease] of this.leases) if (lease.until <= now) this.leases.delete(l)
    const removed: string[] = []
    for (const d of deleted) {
      // A hibernated sandbox resumes from it: its row and layers stay.
      if (resumedFrom.has(d.id)) continue
      let held = false
      for (const layer of d.layers) {
        if (this.o.kinds?.kindOf(layer) !== 'snapshot') continue
        if (live.has(layer)) continue // the live snapshot's, collected when it goes
        if (used.has(layer) || this.leases.has(layer)) { held = true; continue }
        if (this.o.blobRoot !== undefined && !removed.includes(layer)) {
          const paths = storePaths(this.o.blobRoot, layer)
          rmSync(paths.blob, { force: true })
          rmSync(paths.manifest, { force: true })
          removed.push(layer)
        }
      }
      // Kept while a sandbox still stacks one of its layers, so a later sweep removes that layer.
      if (!held) store.purge(d.id)
    }
    return removed
  }
}

export function createSnapshotIndex (options: SnapshotIndexOptions): () => SnapshotIndex {
  return () => new SnapshotIndex(options)
}
