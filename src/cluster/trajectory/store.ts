/**
 * The control plane's store of trajectories (src/state, migration `trajectories`): a header and
 * numbered steps per sandbox, as msgpack, and the record blobs they reference. Batches from the
 * nodes are stored idempotently (a record sent again changes nothing; of one step's records the
 * later wins); reads page by seq; the sweep forgets trajectories past their retention and says
 * which record blobs no trajectory references any more.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { SpecDefaults } from '../spec.js'
import type { Db } from '../../state/index.js'
import { isDigest } from '../../images/blob/index.js'
import { decodeValue, encodeValue } from './codec.js'
import { recordedOf, TrajectoryDefaults, type LogRecord, type ShipAck, type ShipBatch, type Step, type TrajectoryHeader, type TrajectoryPage } from './types.js'

interface TrajectoryRow { sandbox_id: string, tenant: string, header: Buffer, created_at: number, ended_at: number | null, end_seq: number | null, complete: number, bytes: number }

function statements (db: Db) {
  return {
    get: db.prepare<[string], TrajectoryRow>('SELECT * FROM trajectories WHERE sandbox_id = ?'),
    // A header sent again (after a restart of either side) leaves the end where it is.
    putHeader: db.prepare<[string, string, Buffer, number]>(`INSERT INTO trajectories (sandbox_id, tenant, header, created_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (sandbox_id) DO UPDATE SET tenant = excluded.tenant, header = excluded.header, created_at = excluded.created_at`),
    /** What a step already stored holds, so storing it again counts only the difference. */
    stepSize: db.prepare<[string, number], { rev: number, bytes: number }>('SELECT rev, length(body) AS bytes FROM trajectory_steps WHERE sandbox_id = ? AND seq = ?'),
    putStep: db.prepare<[string, number, number, string, number, Buffer]>(`INSERT INTO trajectory_steps VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (sandbox_id, seq) DO UPDATE SET rev = excluded.rev, kind = excluded.kind, at = excluded.at, body = excluded.body
      WHERE excluded.rev >= trajectory_steps.rev`),
    putBlob: db.prepare<[string, string]>('INSERT OR IGNORE INTO trajectory_blobs VALUES (?, ?)'),
    putEnded: db.prepare<[string, string, Buffer, number, number, number, number]>(`INSERT INTO trajectories (sandbox_id, tenant, header, created_at, ended_at, end_seq, complete)
      VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (sandbox_id) DO UPDATE SET tenant = excluded.tenant, header = excluded.header, created_at = excluded.created_at,
        ended_at = excluded.ended_at, end_seq = excluded.end_seq, complete = max(complete, excluded.complete)`),
    end: db.prepare<[number, number, string]>('UPDATE trajectories SET ended_at = ?, end_seq = ? WHERE sandbox_id = ?'),
    // Complete once ended and every step it recorded is here, final: one statement, asked only when it may have become so.
    settle: db.prepare<[string, string]>(`UPDATE trajectories SET complete = 1 WHERE sandbox_id = ? AND complete = 0 AND end_seq IS NOT NULL
      AND (SELECT count(*) FROM trajectory_steps WHERE sandbox_id = ? AND seq < trajectories.end_seq AND rev = 1) >= end_seq`),
    reopen: db.prepare<[string]>('UPDATE trajectories SET ended_at = NULL, end_seq = NULL, complete = 0 WHERE sandbox_id = ?'),
    steps: db.prepare<[string, number, number], { seq: number, body: Buffer }>('SELECT seq, body FROM trajectory_steps WHERE sandbox_id = ? AND seq >= ? ORDER BY seq LIMIT ?'),
    lastSeq: db.prepare<[string], { seq: number | null }>('SELECT max(seq) AS seq FROM trajectory_steps WHERE sandbox_id = ?'),
    hasBlob: db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM trajectory_blobs WHERE digest = ? AND sandbox_id = ?'),
    blobUsed: db.prepare<[string], { one: number }>('SELECT 1 AS one FROM trajectory_blobs WHERE digest = ? LIMIT 1'),
    blobsOf: db.prepare<[string], { digest: string }>('SELECT digest FROM trajectory_blobs WHERE sandbox_id = ?'),
    expired: db.prepare<[number, number, number], { sandbox_id: string }>(`SELECT sandbox_id FROM trajectories
      WHERE (ended_at IS NOT NULL AND ended_at < ?) OR (ended_at IS NULL AND created_at < ?) LIMIT ?`),
    delSteps: db.prepare<[string]>('DELETE FROM trajectory_steps WHERE sandbox_id = ?'),
    delBlobs: db.prepare<[string]>('DELETE FROM trajectory_blobs WHERE sandbox_id = ?'),
    delTrajectory: db.prepare<[string]>('DELETE FROM trajectories WHERE sandbox_id = ?'),
    addBytes: db.prepare<[number, string]>('UPDATE trajectories SET bytes = bytes + ? WHERE sandbox_id = ?'),
    tenantBytes: db.prepare<[], { tenant: string, bytes: number }>('SELECT tenant, sum(bytes) AS bytes FROM trajectories GROUP BY tenant'),
    oldestEnded: db.prepare<[string, number], { sandbox_id: string }>('SELECT sandbox_id FROM trajectories WHERE tenant = ? AND ended_at IS NOT NULL ORDER BY ended_at LIMIT ?')
  }
}

/** True for a record a node could have written (a node's bug must not stop its log from being acknowledged). */
function isRecord (r: unknown): r is LogRecord {
  if (r === null || typeof r !== 'object') return false
  const x = r as Record<string, unknown>
  if (x.t === 'header') return x.header !== null && typeof x.header === 'object' && typeof (x.header as TrajectoryHeader).tenant === 'string'
  if (x.t === 'end' || x.t === 'continue') return Number.isSafeInteger(x.at) && Number.isSafeInteger(x.nextSeq)
  if (x.t !== 'step' || x.step === null || typeof x.step !== 'object') return false
  const step = x.step as Step
  return Number.isSafeInteger(step.seq) && step.seq >= 0 && Number.isSafeInteger(step.at) && typeof step.kind === 'string'
}

export class TrajectoryStore {
  private readonly sql: ReturnType<typeof statements>
  /** Bytes each tenant's trajectories hold (the sum of their `bytes`), read once and kept as they change. */
  private readonly tenantBytes = new Map<string, number>()

  /** @param db the state database (src/state), migrated */
  constructor (private readonly db: Db) {
    this.sql = statements(db)
    for (const r of this.sql.tenantBytes.all()) this.tenantBytes.set(r.tenant, r.bytes)
  }

  /** Bytes the tenant's trajectories hold here and in the blob store. */
  bytesOf (tenant: string): number {
    return this.tenantBytes.get(tenant) ?? 0
  }

  /** The tenants whose trajectories hold more than `limitOf` allows them. */
  tenantsOver (limitOf: (tenant: string) => number): string[] {
    return [...this.tenantBytes].filter(([tenant, bytes]) => bytes > limitOf(tenant)).map(([tenant]) => tenant)
  }

  /**
   * Forgets the tenant's oldest ended trajectories, before their retention, until what it keeps
   * is within `limit` (or only live ones are left), at most `max` of them.
   * @returns how many went, and the record blobs no trajectory references any more
   */
  trim (tenant: string, limit: number, max = 1000): { deleted: number, orphans: string[] } {
    return this.db.transaction(() => {
      const orphans = new Set<string>()
      let deleted = 0
      while (this.bytesOf(tenant) > limit && deleted < max) {
        const ids = this.sql.oldestEnded.all(tenant, Math.min(100, max - deleted)).map((r) => r.sandbox_id)
        if (ids.length === 0) break
        for (const id of ids) {
          if (this.bytesOf(tenant) <= limit) break
          for (const d of this.forget(id)) orphans.add(d)
          deleted++
        }
      }
      return { deleted, orphans: [...orphans].filter((d) => this.sql.blobUsed.get(d) === undefined) }
    })()
  }

  /** Stores a node's batch in one transaction and answers how far each log is stored. */
  append (batch: ShipBatch): ShipAck {
    return this.db.transaction((): ShipAck => {
      for (const log of batch.logs) this.appendLog(log.sandboxId, log.first, log.records)
      return { acks: batch.logs.map((l) => ({ sandboxId: l.sandboxId, upTo: l.first + l.records.length - 1 })) }
    })()
  }

  /**
   * Steps of a tenant's trajectory from `fromSeq`: at most `limit` and about `maxPageBytes` (one
   * at least), stopping before a seq not stored yet, so paging on from `nextSeq` skips nothing.
   * @throws WARREN_ERR_NOT_FOUND for a trajectory the tenant has not (another tenant's too)
   */
  read (tenant: string, sandboxId: string, fromSeq: number, limit: number = TrajectoryDefaults.maxPage, maxPageBytes = TrajectoryDefaults.maxPageBytes): TrajectoryPage {
    const row = this.own(tenant, sandboxId)
    const steps: Step[] = []
    let bytes = 0
    let next = fromSeq
    for (const r of this.sql.steps.all(sandboxId, fromSeq, Math.max(1, Math.min(limit, TrajectoryDefaults.maxPage)))) {
      if (r.seq !== next || (steps.length > 0 && bytes + r.body.length > maxPageBytes)) break
      steps.push(decodeValue<Step>(r.body))
      bytes += r.body.length
      next = r.seq + 1
    }
    return {
      ...(fromSeq === 0 ? { header: decodeValue<TrajectoryHeader>(row.header) } : {}),
      steps, nextSeq: next, complete: row.complete === 1
    }
  }

  /** The seq a sandbox made again under its id goes on from (0 when none was recorded). */
  nextSeq (sandboxId: string): number {
    const row = this.sql.get.get(sandboxId)
    const last = this.sql.lastSeq.get(sandboxId)?.seq
    return Math.max(row?.end_seq ?? 0, last === null || last === undefined ? 0 : last + 1)
  }

  /**
   * Checks that a tenant may read a record blob: one its trajectory references.
   * @throws WARREN_ERR_NOT_FOUND naming `digest` otherwise (or for another tenant's trajectory, as for none)
   */
  checkBlob (tenant: string, sandboxId: string, digest: string): void {
    this.own(tenant, sandboxId)
    if (!isDigest(digest) || this.sql.hasBlob.get(digest, sandboxId) === undefined) {
      throw createError(ErrorCodes.NOT_FOUND, `the trajectory of ${sandboxId} keeps no blob ${digest.slice(0, 80)}`, { field: 'digest' })
    }
  }

  /**
   * Forgets trajectories that ended before `endedBefore` (or, never ended, were made before
   * `createdBefore`), at most `max` of them.
   * @returns how many went, and the record blobs no trajectory references any more (for the blob store to delete)
   */
  sweep (endedBefore: number, createdBefore: number, max = 1000): { deleted: number, orphans: string[] } {
    return this.db.transaction(() => {
      const orphans = new Set<string>()
      const ids = this.sql.expired.all(endedBefore, createdBefore, max).map((r) => r.sandbox_id)
      for (const id of ids) for (const d of this.forget(id)) orphans.add(d)
      return { deleted: ids.length, orphans: [...orphans].filter((d) => this.sql.blobUsed.get(d) === undefined) }
    })()
  }

  /** Deletes one trajectory (inside the caller's transaction). @returns the blobs it referenced */
  private forget (id: string): string[] {
    const row = this.sql.get.get(id)
    const digests = this.sql.blobsOf.all(id).map((r) => r.digest)
    this.sql.delSteps.run(id)
    this.sql.delBlobs.run(id)
    this.sql.delTrajectory.run(id)
    if (row !== undefined) this.count(row.tenant, -row.bytes)
    return digests
  }

  private count (tenant: string, delta: number): void {
    if (delta === 0) return
    const next = this.bytesOf(tenant) + delta
    if (next > 0) this.tenantBytes.set(tenant, next)
    else this.tenantBytes.delete(tenant)
  }

  /**
   * True when the tenant's sandbox began a trajectory that has not ended, within the longest a
   * sandbox may live: it exists, though no node may have reported it yet (after a restart).
   */
  isOpen (tenant: string, sandboxId: string, now = Date.now()): boolean {
    const row = this.sql.get.get(sandboxId)
    return row !== undefined && row.tenant === tenant && row.ended_at === null && row.created_at > now - SpecDefaults.maxTtlMs
  }

  private own (tenant: string, sandboxId: string): TrajectoryRow {
    const row = this.sql.get.get(sandboxId)
    if (row === undefined || row.tenant !== tenant) throw createError(ErrorCodes.NOT_FOUND, `no trajectory of sandbox ${sandboxId}`, { field: 'id' })
    return row
  }

  /**
   * One log's run of records. The trajectory's row is written once, at the end of the run: a
   * short sandbox's whole log (header to end) is one insert, and when the run holds its whole
   * log, whether it is complete is known without asking the database.
   */
  private appendLog (sandboxId: string, first: number, records: Uint8Array[]): void {
    let header: TrajectoryHeader | undefined
    let known: boolean | undefined
    /** undefined: no word on the end in this run; null: made again (not ended). */
    let end: { at: number, nextSeq: number } | null | undefined
    const finals = new Set<number>()
    /** Bytes the run adds to the trajectory (its steps as stored, the blobs they newly reference). */
    let bytes = 0
    for (const raw of records) {
      let record: unknown
      try { record = decodeValue(raw) } catch { continue }
      if (!isRecord(record)) continue
      switch (record.t) {
        case 'header': header = record.header; known = true; break
        case 'end': end = { at: record.at, nextSeq: record.nextSeq }; break
        case 'continue': end = null; break
        case 'step': {
          // Steps of a trajectory the sweep already forgot (or whose header never came) go nowhere.
          if ((known ??= this.sql.get.get(sandboxId) !== undefined) === false) continue
          const { step } = record
          const body = encodeValue(step)
          const rev = record.final ? 1 : 0
          // The later record of a step replaces the earlier: it counts only the difference.
          const stored = this.sql.stepSize.get(sandboxId, step.seq)
          if (stored === undefined || stored.rev <= rev) bytes += body.length - (stored?.bytes ?? 0)
          this.sql.putStep.run(sandboxId, step.seq, rev, step.kind, step.at, body)
          for (const r of recordedOf(step)) {
            if (typeof r.blob === 'string' && this.sql.putBlob.run(r.blob, sandboxId).changes > 0) bytes += r.bytes
          }
          if (record.final) finals.add(step.seq); else finals.delete(step.seq)
        }
      }
    }
    const wholeLog = first === 0 && header !== undefined && end != null
    const complete = wholeLog && Array.from({ length: end!.nextSeq }, (_, i) => i).every((seq) => finals.has(seq))
    if (header !== undefined) {
      if (end != null) this.sql.putEnded.run(sandboxId, header.tenant, encodeValue(header), header.createdAt, end.at, end.nextSeq, complete ? 1 : 0)
      else this.sql.putHeader.run(sandboxId, header.tenant, encodeValue(header), header.createdAt)
    } else if (end != null) {
      this.sql.end.run(end.at, end.nextSeq, sandboxId)
    }
    if (bytes !== 0) {
      // After the row's insert: a run that began the trajectory wrote its row just above.
      this.sql.addBytes.run(bytes, sandboxId)
      const tenant = header?.tenant ?? this.sql.get.get(sandboxId)?.tenant
      if (tenant !== undefined) this.count(tenant, bytes)
    }
    if (end === null) this.sql.reopen.run(sandboxId)
    if (!complete && (end != null || finals.size > 0)) this.sql.settle.run(sandboxId, sandboxId)
  }

}
