/**
 * The audit log: append-only JSON lines in the control plane's data dir, one file per tenant
 * (`audit/<tenant>.log`, rotated by size into `.1` … `.<keepFiles>`, the oldest deleted), so
 * one tenant's records never push another's out: each tenant holds at most
 * `(keepFiles + 1) × maxFileBytes` on disk, and rotates only its own. The single `audit.log` of
 * earlier versions is read by queries and never written again. Without a data dir it is the
 * newest `maxMemoryRecords` of each tenant in memory.
 *
 * A request never waits for the disk: `append` queues the line and returns; each tenant's file
 * has one writer draining its queue, a batch a write. Each tenant's queue is bounded (records and
 * bytes), and so are all of them together. When one is full — the disk is slower than the
 * requests, or failing — a record is dropped and counted rather than held or made to wait: an
 * audit log that stalls the cluster would be turned off. Drops are logged (at most once a second)
 * and written into the tenant's file itself, as a record `audit.dropped` with how many, once
 * there is room again, so a gap is visible where it happened.
 *
 * Writes are not fsynced: a crash of the process loses nothing written, a power loss may lose
 * the last moments (as with the trajectory store).
 */
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { createError, ErrorCodes } from '../../errors.js'
import { errorField } from '../../log/index.js'
import { AuditFile, readAuditFiles, type SharedQueue } from './audit-file.js'
import { Collector } from './query.js'
import { AuditDefaults, type AuditPage, type AuditQuery, type AuditRecord, type AuditSink, type AuditTunables } from './types.js'

export interface AuditLogOptions {
  /** The control plane's data dir; undefined keeps the records in memory. */
  dir?: string
  log: Logger
  tunables?: Partial<AuditTunables>
}

/** What a tenant's file is named by: its name when it is one (src/cluster/iam checkTenant), else one shared name no tenant can have. */
const TENANT_FILE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/
const partitionOf = (tenant: string): string => TENANT_FILE.test(tenant) ? tenant : AuditDefaults.otherPartition
/** The tenant a file of the audit dir belongs to: `acme.log`, `acme.log.3` → `acme`. */
const FILE_NAME = /^(.+)\.log(?:\.\d+)?$/

/** A ring of the newest lines of one tenant, without a data dir. */
interface MemoryRing { lines: string[], head: number }

export class AuditLog implements AuditSink {
  private readonly t: AuditTunables
  private readonly log: Logger
  /** `<dataDir>/audit`: one file (and its rotations) per tenant. */
  private readonly partitionDir: string | undefined
  /** The one file of earlier versions, read by queries, never written. */
  private readonly legacyFile: string | undefined
  private readonly partitions = new Map<string, AuditFile>()
  private readonly memory = new Map<string, MemoryRing>()
  /** Bytes queued to the disk over every tenant (each tenant's queue has its own bound too). */
  private readonly queued: SharedQueue
  private queries = 0
  /** The last record's `seq`. */
  private seq = 0
  private closed = false
  private droppedUnlogged = 0
  private lastDropLog = 0
  /** Every record dropped since start (for metrics and tests). */
  dropped = 0

  constructor (o: AuditLogOptions) {
    this.t = { ...pick(AuditDefaults), ...o.tunables }
    this.log = o.log
    this.queued = { bytes: 0, maxBytes: this.t.maxQueuedBytes }
    if (o.dir !== undefined) {
      this.partitionDir = join(o.dir, AuditDefaults.dirName)
      mkdirSync(this.partitionDir, { recursive: true, mode: 0o700 })
      this.legacyFile = join(o.dir, AuditDefaults.legacyFileName)
    }
  }

  append (record: AuditRecord): void {
    if (this.closed) return
    record = { ...record, seq: ++this.seq }
    // A field copied from a request may hold what JSON has no form for (a 64-bit integer): as text.
    const line = JSON.stringify(record, (_key, v: unknown) => typeof v === 'bigint' ? v.toString() : v) + '\n'
    const name = partitionOf(record.tenant)
    if (this.partitionDir === undefined) {
      let ring = this.memory.get(name)
      if (ring === undefined) this.memory.set(name, ring = { lines: [], head: 0 })
      if (ring.lines.length < this.t.maxMemoryRecords) ring.lines.push(line)
      else { ring.lines[ring.head] = line; ring.head = (ring.head + 1) % ring.lines.length }
      return
    }
    let file = this.partitions.get(name)
    if (file === undefined) this.partitions.set(name, file = this.partitionFile(name))
    file.append(record, line)
  }

  private partitionFile (name: string): AuditFile {
    return new AuditFile(join(this.partitionDir!, `${name}.log`), name, {
      maxFileBytes: this.t.maxFileBytes, keepFiles: this.t.keepFiles, maxQueuedRecords: this.t.maxQueuedRecordsPerTenant, maxQueuedBytes: this.t.maxQueuedBytesPerTenant
    }, this.queued, (n, why, err) => this.noteDropped(n, why, err))
  }

  private noteDropped (n: number, why: string, err?: unknown): void {
    this.dropped += n
    this.droppedUnlogged += n
    const now = Date.now()
    if (now - this.lastDropLog < AuditDefaults.dropLogEveryMs) return
    this.lastDropLog = now
    this.log.error({ dropped: this.droppedUnlogged, total: this.dropped, ...(err !== undefined ? { err: errorField(err) } : {}) }, `audit records dropped: ${why}`)
    this.droppedUnlogged = 0
  }

  /** The files holding records: the earlier versions' first, then each tenant's, each oldest first. */
  files (): string[] {
    return [...this.fileSets().values()].flat()
  }

  /** Files by tenant (`''`: the earlier versions' shared file), of one tenant when given. */
  private fileSets (tenant?: string): Map<string, string[]> {
    const sets = new Map<string, string[]>()
    if (this.partitionDir === undefined) return sets
    const legacy = [...Array.from({ length: this.t.keepFiles }, (_, i) => `${this.legacyFile!}.${this.t.keepFiles - i}`), this.legacyFile!].filter((f) => existsSync(f))
    if (legacy.length > 0) sets.set('', legacy)
    const names = tenant !== undefined ? [partitionOf(tenant)] : [...new Set(readdirSync(this.partitionDir).map((f) => FILE_NAME.exec(f)?.[1]).filter((n) => n !== undefined))].sort()
    for (const name of names) {
      const files = (this.partitions.get(name) ?? this.partitionFile(name)).files()
      if (files.length > 0) sets.set(name, files)
    }
    return sets
  }

  /**
   * The newest records matching `q`, oldest first (what is still queued is written first). A
   * query of one tenant reads only its files (and the earlier versions' shared file).
   * @throws WARREN_ERR_OVERLOADED with retryAfterMs while `maxConcurrentQueries` are running
   */
  async query (q: AuditQuery): Promise<AuditPage> {
    if (this.queries >= AuditDefaults.maxConcurrentQueries) {
      throw createError(ErrorCodes.OVERLOADED, `${this.queries} audit queries are running`, { retryAfterMs: 1000 })
    }
    this.queries++
    try {
      const c = new Collector(q)
      if (this.partitionDir === undefined) {
        for (const [name, ring] of this.memory) {
          if (q.tenant !== undefined && name !== partitionOf(q.tenant)) continue
          for (let i = 0; i < ring.lines.length; i++) c.offerLine(ring.lines[(ring.head + i) % ring.lines.length]!.trimEnd())
        }
        return c.page()
      }
      await Promise.all([...this.partitions.values()].map(async (f) => await f.flushed()))
      for (const files of this.fileSets(q.tenant).values()) await readAuditFiles(files, q.since, (line) => c.offerLine(line))
      return c.page()
    } finally {
      this.queries--
    }
  }

  /** Writes what is queued and closes the files; later appends are ignored. */
  async close (): Promise<void> {
    this.closed = true
    await Promise.all([...this.partitions.values()].map(async (f) => await f.flushed()))
  }
}

function pick (d: typeof AuditDefaults): AuditTunables {
  return {
    maxFileBytes: d.maxFileBytes, keepFiles: d.keepFiles, maxQueuedBytes: d.maxQueuedBytes,
    maxQueuedRecordsPerTenant: d.maxQueuedRecordsPerTenant, maxQueuedBytesPerTenant: d.maxQueuedBytesPerTenant, maxMemoryRecords: d.maxMemoryRecords
  }
}
