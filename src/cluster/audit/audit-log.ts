/**
 * The audit log: append-only JSON lines in `<dataDir>/audit.log`, rotated by size
 * (`audit.log.1` … `audit.log.<keepFiles>`, the oldest deleted), so it never holds more than
 * `(keepFiles + 1) × maxFileBytes` on disk. Without a data dir it is the newest
 * `maxMemoryRecords` in memory.
 *
 * A request never waits for the disk: `append` queues the line and returns; one writer drains the
 * queue, a batch a write. The queue is bounded (records and bytes). When it is full — the disk
 * is slower than the requests, or failing — a record is dropped and counted rather than held or
 * made to wait: an audit log that stalls the cluster would be turned off. Drops are logged (at
 * most once a second) and written into the log itself, as a record `audit.dropped` with how
 * many, once there is room again, so a gap is visible where it happened.
 *
 * Writes are not fsynced: a crash of the process loses nothing written, a power loss may lose
 * the last moments (as with the trajectory store).
 */
import { createReadStream, existsSync, mkdirSync, statSync } from 'node:fs'
import { open, rename, rm, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { Logger } from 'pino'
import { createError, ErrorCodes } from '../../errors.js'
import { errorField } from '../../log/index.js'
import { Collector } from './query.js'
import { AuditDefaults, type AuditPage, type AuditQuery, type AuditRecord, type AuditSink, type AuditTunables } from './types.js'

export interface AuditLogOptions {
  /** The control plane's data dir; undefined keeps the records in memory. */
  dir?: string
  log: Logger
  tunables?: Partial<AuditTunables>
}

export class AuditLog implements AuditSink {
  private readonly t: AuditTunables
  private readonly file: string | undefined
  private readonly log: Logger
  private queue: string[] = []
  private queuedBytes = 0
  /** Without a data dir: a ring of the newest lines, `memoryHead` the oldest's slot once full. */
  private readonly memory: string[] = []
  private memoryHead = 0
  private fh: FileHandle | undefined
  private size = 0
  private draining: Promise<void> | undefined
  private queries = 0
  private closed = false
  /** Dropped since the last `audit.dropped` record, and since the last log line about it. */
  private droppedUnrecorded = 0
  private droppedUnlogged = 0
  private lastDropLog = 0
  /** Every record dropped since start (for metrics and tests). */
  dropped = 0

  constructor (o: AuditLogOptions) {
    this.t = { ...pick(AuditDefaults), ...o.tunables }
    this.log = o.log
    if (o.dir !== undefined) {
      mkdirSync(o.dir, { recursive: true })
      this.file = join(o.dir, AuditDefaults.fileName)
      this.size = existsSync(this.file) ? statSync(this.file).size : 0
    }
  }

  append (record: AuditRecord): void {
    if (this.closed) return
    const line = JSON.stringify(record) + '\n'
    if (this.file === undefined) {
      if (this.memory.length < this.t.maxMemoryRecords) this.memory.push(line)
      else { this.memory[this.memoryHead] = line; this.memoryHead = (this.memoryHead + 1) % this.memory.length }
      return
    }
    if (this.queue.length >= this.t.maxQueuedRecords || this.queuedBytes + line.length > this.t.maxQueuedBytes) {
      this.drop(1, 'the queue to the disk is full')
      return
    }
    if (this.droppedUnrecorded > 0) {
      // Room again: the gap is written where it happened, before the record that follows it.
      this.enqueue(JSON.stringify({ at: record.at, action: 'audit.dropped', tenant: '', keyId: '', outcome: 'ok', ms: 0, dropped: this.droppedUnrecorded } satisfies AuditRecord) + '\n')
      this.droppedUnrecorded = 0
    }
    this.enqueue(line)
  }

  private enqueue (line: string): void {
    this.queue.push(line)
    this.queuedBytes += line.length
    this.draining ??= this.drain().finally(() => { this.draining = undefined })
  }

  private drop (n: number, why: string, err?: unknown): void {
    this.dropped += n
    this.droppedUnrecorded += n
    this.droppedUnlogged += n
    const now = Date.now()
    if (now - this.lastDropLog < AuditDefaults.dropLogEveryMs) return
    this.lastDropLog = now
    this.log.error({ dropped: this.droppedUnlogged, total: this.dropped, ...(err !== undefined ? { err: errorField(err) } : {}) }, `audit records dropped: ${why}`)
    this.droppedUnlogged = 0
  }

  /**
   * Writes what is queued, a batch a write, until the queue is empty. A batch is cut where the
   * file would pass its bound, so no file holds more than `maxFileBytes` (unless one record does).
   */
  private async drain (): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue
      this.queue = []
      this.queuedBytes = 0
      let i = 0
      while (i < batch.length) {
        let text = ''
        let bytes = 0
        const from = i
        for (; i < batch.length; i++) {
          const n = Buffer.byteLength(batch[i]!)
          if (this.size + bytes + n > this.t.maxFileBytes && (this.size > 0 || bytes > 0)) break
          text += batch[i]
          bytes += n
        }
        try {
          if (bytes === 0) { await this.rotate(); continue }
          this.fh ??= await open(this.file!, 'a', 0o600)
          await this.fh.write(text)
          this.size += bytes
        } catch (err) {
          // A failed rotation loses the rest of this batch (the next batch tries again); a failed write, its part.
          if (bytes === 0) i = batch.length
          this.drop(i - from, bytes === 0 ? 'rotating the audit file failed' : 'writing the audit file failed', err)
          await this.fh?.close().catch(() => {})
          this.fh = undefined
        }
      }
    }
  }

  /** `audit.log` becomes `audit.log.1`, each older one moves up by one, the oldest goes. */
  private async rotate (): Promise<void> {
    await this.fh?.close()
    this.fh = undefined
    const f = this.file!
    await rm(`${f}.${this.t.keepFiles}`, { force: true })
    for (let i = this.t.keepFiles - 1; i >= 1; i--) {
      if (existsSync(`${f}.${i}`)) await rename(`${f}.${i}`, `${f}.${i + 1}`)
    }
    if (this.t.keepFiles > 0) await rename(f, `${f}.1`)
    else await rm(f, { force: true })
    this.size = 0
  }

  /** The files holding records, oldest first. */
  files (): string[] {
    if (this.file === undefined) return []
    const out: string[] = []
    for (let i = this.t.keepFiles; i >= 1; i--) if (existsSync(`${this.file}.${i}`)) out.push(`${this.file}.${i}`)
    if (existsSync(this.file)) out.push(this.file)
    return out
  }

  /**
   * The newest records matching `q`, oldest first (what is still queued is written first).
   * @throws WARREN_ERR_OVERLOADED with retryAfterMs while `maxConcurrentQueries` are running
   */
  async query (q: AuditQuery): Promise<AuditPage> {
    if (this.queries >= AuditDefaults.maxConcurrentQueries) {
      throw createError(ErrorCodes.OVERLOADED, `${this.queries} audit queries are running`, { retryAfterMs: 1000 })
    }
    this.queries++
    try {
      const c = new Collector(q)
      if (this.file === undefined) {
        for (let i = 0; i < this.memory.length; i++) c.offerLine(this.memory[(this.memoryHead + i) % this.memory.length]!.trimEnd())
        return c.page()
      }
      await this.draining
      for (const f of this.files()) {
        // A rotated file last written before `since` holds nothing newer: not read at all.
        if (q.since !== undefined && f !== this.file && statMtime(f) < q.since) continue
        const lines = createInterface({ input: createReadStream(f, { encoding: 'utf8' }), crlfDelay: Infinity })
        try {
          for await (const line of lines) c.offerLine(line)
        } catch (err) {
          // Rotated away under the read: what was read stands.
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
        }
      }
      return c.page()
    } finally {
      this.queries--
    }
  }

  /** Writes what is queued and closes the file; later appends are ignored. */
  async close (): Promise<void> {
    this.closed = true
    await this.draining
    await this.fh?.close().catch(() => {})
    this.fh = undefined
  }
}

function statMtime (f: string): number {
  try { return statSync(f).mtimeMs } catch { return 0 }
}

function pick (d: typeof AuditDefaults): AuditTunables {
  return { maxFileBytes: d.maxFileBytes, keepFiles: d.keepFiles, maxQueuedRecords: d.maxQueuedRecords, maxQueuedBytes: d.maxQueuedBytes, maxMemoryRecords: d.maxMemoryRecords }
}
