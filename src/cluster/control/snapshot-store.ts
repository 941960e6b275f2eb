/**
 * SnapshotStore: the snapshots of every tenant, kept in the control plane's state database
 * (src/state, table `snapshots`), so a snapshot outlives the sandbox it was cut from, the
 * control plane's restarts, and the node it was made on (its layers are in the blob store).
 * A name (`name:tag`) is unique among a tenant's live snapshots: naming a new one with it moves
 * the name. A deleted snapshot keeps its row until the garbage collector (snapshot-index.ts)
 * has removed the layers only it held.
 */
import { customAlphabet } from 'nanoid'
import type { Db } from '../../state/index.js'
import type { SandboxSpec } from '../spec.js'

/** A snapshot as a client sees it. */
export interface SnapshotView {
  id: string
  name?: string
  sandboxId: string
  backend: string
  /** The whole stack, bottom first: the refs as the sandbox had them, then the diffs. */
  layers: string[]
  /** The size of the layer this snapshot added. */
  bytes: number
  createdAt: number
  /** The snapshot the sandbox was created from, when it was. */
  parent?: string
  /** True for a memory snapshot (its last layer is the VM's saved state: sandboxes from it go on running). */
  memory?: boolean
}

/** A snapshot as the control plane keeps it. */
export interface SnapshotRecord extends SnapshotView {
  tenant: string
  /**
   * The spec a sandbox made from it starts with: the source sandbox's spec as resolved, with
   * `image` the snapshot's stack (so `placementRequestOf(spec).layers` equals `layers`).
   */
  spec: SandboxSpec
  deletedAt?: number
}

const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz'
const newSuffix = customAlphabet(ID_ALPHABET, 16)
const SNAPSHOT_ID = /^snap-[0-9a-z]{16}$/

/** A new snapshot id: `snap-` and 16 of [0-9a-z]. */
export function newSnapshotId (): string {
  return `snap-${newSuffix()}`
}

/** True when `ref` has the form of a snapshot id (else it is taken as a name). */
export function isSnapshotId (ref: string): boolean {
  return SNAPSHOT_ID.test(ref)
}

interface Row {
  id: string
  tenant: string
  name: string | null
  sandbox_id: string
  backend: string
  layers: string
  spec: string
  bytes: number
  created_at: number
  parent: string | null
  deleted_at: number | null
}

function statements (db: Db) {
  return {
    insert: db.prepare<[string, string, string | null, string, string, string, string, number, number, string | null]>(
      'INSERT INTO snapshots (id, tenant, name, sandbox_id, backend, layers, spec, bytes, created_at, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
    unname: db.prepare<[string, string]>('UPDATE snapshots SET name = NULL WHERE tenant = ? AND name = ? AND deleted_at IS NULL'),
    byId: db.prepare<[string, string], Row>('SELECT * FROM snapshots WHERE tenant = ? AND id = ? AND deleted_at IS NULL'),
    byName: db.prepare<[string, string], Row>('SELECT * FROM snapshots WHERE tenant = ? AND name = ? AND deleted_at IS NULL'),
    anyById: db.prepare<[string], Row>('SELECT * FROM snapshots WHERE id = ?'),
    list: db.prepare<[string, number], Row>('SELECT * FROM snapshots WHERE tenant = ? AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT ?'),
    listOf: db.prepare<[string, string, number], Row>('SELECT * FROM snapshots WHERE tenant = ? AND sandbox_id = ? AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT ?'),
    count: db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM snapshots WHERE tenant = ? AND deleted_at IS NULL'),
    markDeleted: db.prepare<[number, string]>('UPDATE snapshots SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL'),
    liveLayers: db.prepare<[], { layers: string }>('SELECT layers FROM snapshots WHERE deleted_at IS NULL'),
    deleted: db.prepare<[number], Row>('SELECT * FROM snapshots WHERE deleted_at IS NOT NULL ORDER BY deleted_at LIMIT ?'),
    purge: db.prepare<[string]>('DELETE FROM snapshots WHERE id = ? AND deleted_at IS NOT NULL')
  }
}

function fromRow (r: Row): SnapshotRecord {
  return {
    id: r.id, tenant: r.tenant, sandboxId: r.sandbox_id, backend: r.backend, layers: JSON.parse(r.layers) as string[],
    spec: JSON.parse(r.spec) as SandboxSpec, bytes: r.bytes, createdAt: r.created_at,
    ...(r.name !== null ? { name: r.name } : {}),
    ...(r.parent !== null ? { parent: r.parent } : {}),
    ...(r.deleted_at !== null ? { deletedAt: r.deleted_at } : {})
  }
}

/** What a client is shown of a record (no tenant, no spec). */
export function toSnapshotView (r: SnapshotRecord): SnapshotView {
  return {
    id: r.id, sandboxId: r.sandboxId, backend: r.backend, layers: r.layers, bytes: r.bytes, createdAt: r.createdAt,
    ...(r.name !== undefined ? { name: r.name } : {}),
    ...(r.parent !== undefined ? { parent: r.parent } : {}),
    ...(r.spec.memory !== undefined ? { memory: true } : {})
  }
}

export class SnapshotStore {
  private readonly sql: ReturnType<typeof statements>

  /** @param db the state database, migrated (table snapshots) */
  constructor (private readonly db: Db) {
    this.sql = statements(db)
  }

  /** Records a new snapshot; its name, if it has one, is taken from any other live snapshot of the tenant. */
  put (r: SnapshotRecord): void {
    this.db.transaction(() => {
      if (r.name !== undefined) this.sql.unname.run(r.tenant, r.name)
      this.sql.insert.run(r.id, r.tenant, r.name ?? null, r.sandboxId, r.backend, JSON.stringify(r.layers), JSON.stringify(r.spec), r.bytes, r.createdAt, r.parent ?? null)
    })()
  }

  /** A live snapshot of the tenant by id or name; undefined for another tenant's, a deleted or an unknown one. */
  get (tenant: string, ref: string): SnapshotRecord | undefined {
    const row = isSnapshotId(ref) ? this.sql.byId.get(tenant, ref) : this.sql.byName.get(tenant, ref)
    return row === undefined ? undefined : fromRow(row)
  }

  /** A snapshot by id, deleted or not (a hibernated sandbox resumes from its own even when deleted). */
  getAny (id: string): SnapshotRecord | undefined {
    const row = this.sql.anyById.get(id)
    return row === undefined ? undefined : fromRow(row)
  }

  /** The tenant's live snapshots, newest first (of one sandbox when `sandboxId` is given). */
  list (tenant: string, limit: number, sandboxId?: string): SnapshotRecord[] {
    const rows = sandboxId === undefined ? this.sql.list.all(tenant, limit) : this.sql.listOf.all(tenant, sandboxId, limit)
    return rows.map(fromRow)
  }

  /** How many live snapshots the tenant has. */
  count (tenant: string): number {
    return this.sql.count.get(tenant)?.n ?? 0
  }

  /** Marks a live snapshot of the tenant deleted; returns it, or undefined when there was none. */
  delete (tenant: string, ref: string, now = Date.now()): SnapshotRecord | undefined {
    const r = this.get(tenant, ref)
    if (r === undefined) return undefined
    this.sql.markDeleted.run(now, r.id)
    return { ...r, deletedAt: now }
  }

  /** Every layer a live snapshot lists. */
  liveLayers (): Set<string> {
    const out = new Set<string>()
    for (const { layers } of this.sql.liveLayers.all()) for (const l of JSON.parse(layers) as string[]) out.add(l)
    return out
  }

  /** Deleted snapshots still holding a row, oldest deletion first. */
  deleted (limit: number): SnapshotRecord[] {
    return this.sql.deleted.all(limit).map(fromRow)
  }

  /** Forgets a deleted snapshot for good. */
  purge (id: string): void {
    this.sql.purge.run(id)
  }
}
