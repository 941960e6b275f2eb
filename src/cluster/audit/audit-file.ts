/**
 * One audit file and its rotations (`<name>`, `<name>.1` … `<name>.<keepFiles>`, the oldest
 * deleted), so it never holds more than `(keepFiles + 1) × maxFileBytes` on disk, with its own
 * bounded queue to the disk and one writer draining it, a batch a write.
 *
 * A full queue drops the record and counts it (the caller logs it); once there is room again a
 * record `audit.dropped` with how many is written where the gap is. Writes are not fsynced.
 * The file is closed whenever the queue is empty, so idle tenants hold no descriptors.
 */
import { createReadStream, existsSync, statSync } from 'node:fs'
import { open, rename, rm, type FileHandle } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import type { AuditRecord } from './types.js'

export interface AuditFileBounds {
  maxFileBytes: number
  keepFiles: number
  maxQueuedRecords: number
  maxQueuedBytes: number
}

/** Told of records dropped (`n`), why, and the error when a write failed. */
export type OnDrop = (n: number, why: string, err?: unknown) => void

/** Bytes queued over all the files of one log, and their bound: a file counts its queue in. */
export interface SharedQueue { bytes: number, readonly maxBytes: number }

export class AuditFile {
  private queue: string[] = []
  private queuedBytes = 0
  private fh: FileHandle | undefined
  private size: number
  private draining: Promise<void> | undefined
  /** Dropped since the last `audit.dropped` record. */
  private droppedUnrecorded = 0

  /**
   * @param path the current file; rotated ones are `path.1` …
   * @param tenant whose records these are: the `audit.dropped` records carry it
   */
  constructor (readonly path: string, private readonly tenant: string, private readonly b: AuditFileBounds, private readonly shared: SharedQueue, private readonly onDrop: OnDrop) {
    this.size = existsSync(path) ? statSync(path).size : 0
  }

  /** Queues a line (a record as JSON, with its newline); never waits. */
  append (record: AuditRecord, line: string): void {
    if (this.queue.length >= this.b.maxQueuedRecords || this.queuedBytes + line.length > this.b.maxQueuedBytes) {
      this.drop(1, 'the tenant\'s queue to the disk is full')
      return
    }
    if (this.shared.bytes + line.length > this.shared.maxBytes) {
      this.drop(1, 'the queues to the disk are full')
      return
    }
    if (this.droppedUnrecorded > 0) {
      // Room again: the gap is written where it happened, before the record that follows it.
      this.enqueue(JSON.stringify({ at: record.at, action: 'audit.dropped', tenant: this.tenant, keyId: '', outcome: 'ok', ms: 0, dropped: this.droppedUnrecorded } satisfies AuditRecord) + '\n')
      this.droppedUnrecorded = 0
    }
    this.enqueue(line)
  }

  /** Resolves once what is queued now is written (or dropped). */
  async flushed (): Promise<void> {
    while (this.draining !== undefined) await this.draining
  }

  /** The files holding records, oldest first. */
  files (): string[] {
    const out: string[] = []
    for (let i = this.b.keepFiles; i >= 1; i--) if (existsSync(`${this.path}.${i}`)) out.push(`${this.path}.${i}`)
    if (existsSync(this.path)) out.push(this.path)
    return out
  }

  private enqueue (line: string): void {
    this.queue.push(line)
    this.queuedBytes += line.length
    this.shared.bytes += line.length
    this.kick()
  }

  /**
   * Starts the writer unless it runs. A line queued while the writer closes the file, after its
   * last look at the queue, is picked up by the writer started when that one ends.
   */
  private kick (): void {
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined
      if (this.queue.length > 0) this.kick()
    })
  }

  private drop (n: number, why: string, err?: unknown): void {
    this.droppedUnrecorded += n
    this.onDrop(n, why, err)
  }

  /**
   * Writes what is queued, a batch a write, until the queue is empty. A batch is cut where the
   * file would pass its bound, so no file holds more than `maxFileBytes` (unless one record does).
   */
  private async drain (): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue
      const batchBytes = this.queuedBytes
      this.queue = []
      this.queuedBytes = 0
      let i = 0
      while (i < batch.length) {
        let text = ''
        let bytes = 0
        const from = i
        for (; i < batch.length; i++) {
          const n = Buffer.byteLength(batch[i]!)
          if (this.size + bytes + n > this.b.maxFileBytes && (this.size > 0 || bytes > 0)) break
          text += batch[i]
          bytes += n
        }
        try {
          if (bytes === 0) { await this.rotate(); continue }
          this.fh ??= await open(this.path, 'a', 0o600)
          await this.fh.write(text)
          this.size += bytes
        } catch (err) {
          // A failed rotation loses the rest of this batch (the next batch tries again); a failed write, its part.
          if (bytes === 0) i = batch.length
          this.drop(i - from, bytes === 0 ? 'rotating the audit file failed' : 'writing the audit file failed', err)
          await this.closeFile()
        }
      }
      // Held until written: what waits for the disk is what the shared bound counts.
      this.shared.bytes -= batchBytes
    }
    await this.closeFile()
  }

  /** The current file becomes `.1`, each older one moves up by one, the oldest goes. */
  private async rotate (): Promise<void> {
    await this.closeFile()
    const f = this.path
    await rm(`${f}.${this.b.keepFiles}`, { force: true })
    for (let i = this.b.keepFiles - 1; i >= 1; i--) {
      if (existsSync(`${f}.${i}`)) await rename(`${f}.${i}`, `${f}.${i + 1}`)
    }
    if (this.b.keepFiles > 0) await rename(f, `${f}.1`)
    else await rm(f, { force: true })
    this.size = 0
  }

  private async closeFile (): Promise<void> {
    await this.fh?.close().catch(() => {})
    this.fh = undefined
  }
}

/**
 * Offers every line of `files` (oldest first) to `offer`; a rotated file last written before
 * `since` holds nothing newer and is not read. A file rotated away under the read: what was read stands.
 */
export async function readAuditFiles (files: string[], since: number | undefined, offer: (line: string) => void): Promise<void> {
  for (const [i, f] of files.entries()) {
    if (since !== undefined && i < files.length - 1 && statMtime(f) < since) continue
    const lines = createInterface({ input: createReadStream(f, { encoding: 'utf8' }), crlfDelay: Infinity })
    try {
      for await (const line of lines) offer(line)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
  }
}

function statMtime (f: string): number {
  try { return statSync(f).mtimeMs } catch { return 0 }
}
