/**
 * One sandbox's trajectory log on its node: records appended as things happen, shipped to the
 * control plane in order, acknowledged by their number in the log (0, 1, …). On disk it is
 * `<dir>/<sandboxId>.log` (records behind their lengths, codec.ts) with `<sandboxId>.ack` saying
 * how far the control plane has acknowledged. A log without a file (a node without a data dir, a
 * sandbox that does not outlive the agent) keeps the records not yet acknowledged in memory
 * instead. The file is the backlog: nothing of it is held in memory.
 */
import { appendFileSync, closeSync, openSync, readFileSync, readSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { decodeValue, frameRecord, LENGTH_BYTES, splitRecords } from './codec.js'
import { RecordBudget } from './recorded-bytes.js'
import { recordedOf, type LogRecord, type Step } from './types.js'

/** What a log says once read back (after a restart of the node agent). */
export interface ScannedLog {
  /** Records in the log. */
  count: number
  /** Bytes of whole records (a record torn by a crash after them is cut off). */
  size: number
  /** The seq of the next step. */
  nextSeq: number
  /** True when its last record says the sandbox ended. */
  ended: boolean
  /** Steps begun and not yet final, by seq (their latest record). */
  open: Map<number, Step>
  /** Bytes its final steps keep whole (the record budget they used). */
  recordedBytes: number
  /** Records the control plane acknowledged, and the bytes they take. */
  acked: number
  ackedOffset: number
}

const SCAN_CHUNK = 1024 * 1024

export const NodeLogDefaults = {
  /**
   * Bytes of records not yet acknowledged that the logs without a file of one node hold together;
   * beyond it (the control plane unreachable for long) their records are dropped, and those
   * trajectories stay incomplete.
   */
  maxMemoryBytes: 256 * 1024 * 1024
}

export class NodeLog {
  /** Records written. */
  count = 0
  /** Records acknowledged: every one before this number. */
  acked = 0
  /** Records handed to the shipper (in flight or acknowledged). */
  sent = 0
  /** True once the sandbox ended (its last record is `end`). */
  ended = false
  /** The batch in flight: acknowledging `upTo` moves `acked` to it and the file offset to `end`. */
  inflight: { upTo: number, end: number } | undefined
  private size = 0
  private ackedOffset = 0
  private sentOffset = 0
  /** Without a file: the records not yet acknowledged, oldest first (number `acked` is the first). */
  private readonly held: Buffer[] = []
  private memoryBytes = 0
  private memoryAppended = 0
  /** Records a log without a file could not hold. */
  dropped = 0
  private removed = false

  /**
   * @param dir the node's trajectory directory; undefined keeps the records in memory
   * @param scanned what an existing file holds (it is appended to)
   * @param memory the bytes the node's logs without a file may hold together
   */
  constructor (readonly sandboxId: string, private readonly dir: string | undefined, scanned?: ScannedLog,
    private readonly memory = new RecordBudget(NodeLogDefaults.maxMemoryBytes)) {
    if (scanned !== undefined) {
      this.count = scanned.count
      this.size = scanned.size
      this.ended = scanned.ended
      this.acked = this.sent = Math.min(scanned.acked, scanned.count)
      this.ackedOffset = this.sentOffset = Math.min(scanned.ackedOffset, scanned.size)
    }
  }

  private get file (): string { return join(this.dir!, `${this.sandboxId}.log`) }
  private get ackFile (): string { return join(this.dir!, `${this.sandboxId}.ack`) }

  /** Bytes of every record written (on disk, or as they were held in memory). */
  get bytes (): number { return this.dir !== undefined ? this.size : this.memoryAppended }

  /** Bytes held in memory (a node without a data dir). */
  get heldBytes (): number { return this.memoryBytes }

  /** True when every record written has been acknowledged. */
  get settled (): boolean { return this.acked >= this.count }

  /** Appends a record: on disk (written through at once, so a crash of the agent loses nothing written), or in memory. */
  append (record: LogRecord): void {
    const { framed, body } = frameRecord(record)
    if (this.dir !== undefined) {
      appendFileSync(this.file, framed, { mode: 0o600 })
      this.size += framed.length
    } else {
      if (!this.memory.take(body.length)) { this.dropped++; return }
      this.held.push(body)
      this.memoryBytes += body.length
      this.memoryAppended += body.length
    }
    this.count++
    this.ended = record.t === 'end' ? true : record.t === 'continue' ? false : this.ended
  }

  /**
   * The next records not yet handed out, at most `maxRecords` and about `maxBytes` (at least one,
   * whatever its size); they are in flight until acknowledged or rewound.
   */
  take (maxRecords: number, maxBytes: number): { first: number, records: Buffer[] } {
    const first = this.sent
    let records: Buffer[]
    let end: number
    if (this.dir === undefined) {
      records = []
      let bytes = 0
      for (let i = this.sent - this.acked; i < this.held.length && records.length < maxRecords; i++) {
        if (records.length > 0 && bytes + this.held[i]!.length > maxBytes) break
        records.push(this.held[i]!)
        bytes += this.held[i]!.length
      }
      end = 0
    } else {
      ({ records, end } = this.readFrom(this.sentOffset, maxRecords, maxBytes))
    }
    this.sent += records.length
    this.sentOffset = end
    if (records.length > 0) this.inflight = { upTo: this.sent - 1, end }
    return { first, records }
  }

  /** The control plane stored every record up to `upTo`. */
  ack (upTo: number): void {
    const inflight = this.inflight
    if (inflight === undefined || upTo !== inflight.upTo) return
    this.inflight = undefined
    const newly = upTo + 1 - this.acked
    if (newly <= 0) return
    if (this.dir === undefined) {
      for (const b of this.held.splice(0, newly)) { this.memoryBytes -= b.length; this.memory.give(b.length) }
    } else {
      this.ackedOffset = inflight.end
    }
    this.acked = upTo + 1
  }

  /**
   * Notes on disk how far the control plane got, so a restarted agent resends only the rest
   * (resending more is harmless: the store takes a record twice as once). Done now and then, not
   * on every acknowledgement: a short-lived sandbox's log is gone before it is ever needed.
   */
  saveAck (): void {
    if (this.dir === undefined || this.removed) return
    try { writeFileSync(this.ackFile, JSON.stringify({ acked: this.acked, offset: this.ackedOffset })) } catch {}
  }

  /** What was in flight was not acknowledged (the link dropped): it goes again. */
  rewind (): void {
    this.inflight = undefined
    this.sent = this.acked
    this.sentOffset = this.ackedOffset
  }

  /** Removes the log (its sandbox ended and the control plane has all of it). */
  remove (): void {
    this.removed = true
    this.held.length = 0
    this.memory.give(this.memoryBytes)
    this.memoryBytes = 0
    if (this.dir === undefined) return
    rmSync(this.file, { force: true })
    rmSync(this.ackFile, { force: true })
  }

  private readFrom (offset: number, maxRecords: number, maxBytes: number): { records: Buffer[], end: number } {
    if (offset >= this.size) return { records: [], end: offset }
    const fd = openSync(this.file, 'r')
    try {
      const length = Buffer.alloc(LENGTH_BYTES)
      readSync(fd, length, 0, LENGTH_BYTES, offset)
      const want = Math.min(this.size - offset, Math.max(maxBytes, LENGTH_BYTES + length.readUInt32BE(0)))
      const bytes = Buffer.allocUnsafe(want)
      let got = 0
      while (got < want) {
        const n = readSync(fd, bytes, got, want - got, offset + got)
        if (n === 0) break
        got += n
      }
      const { bodies, end } = splitRecords(bytes.subarray(0, got), maxRecords)
      // Copied: a view would keep the whole read buffer alive as long as one record is.
      return { records: bodies.map((b) => Buffer.from(b)), end: offset + end }
    } finally {
      closeSync(fd)
    }
  }
}

/**
 * Reads a log file back (after a restart), record by record, and cuts off a record torn by a
 * crash at its end. Never holds more than a chunk of it (and one record) in memory.
 */
export function scanLog (dir: string, sandboxId: string): ScannedLog {
  const file = join(dir, `${sandboxId}.log`)
  const out: ScannedLog = { count: 0, size: 0, nextSeq: 0, ended: false, open: new Map(), recordedBytes: 0, acked: 0, ackedOffset: 0 }
  const fd = openSync(file, 'r')
  try {
    let carry = Buffer.alloc(0)
    for (let pos = 0; ;) {
      const chunk = Buffer.allocUnsafe(SCAN_CHUNK)
      const n = readSync(fd, chunk, 0, SCAN_CHUNK, pos)
      if (n === 0) break
      pos += n
      const bytes = carry.length === 0 ? chunk.subarray(0, n) : Buffer.concat([carry, chunk.subarray(0, n)])
      const { bodies, end } = splitRecords(bytes)
      for (const body of bodies) {
        const record = decodeValue<LogRecord>(body)
        out.count++
        take(out, record)
      }
      out.size += end
      carry = Buffer.from(bytes.subarray(end))
    }
  } finally {
    closeSync(fd)
  }
  truncateSync(file, out.size)
  try {
    const ack = JSON.parse(readFileSync(join(dir, `${sandboxId}.ack`), 'utf8')) as { acked?: unknown, offset?: unknown }
    if (typeof ack.acked === 'number' && typeof ack.offset === 'number') { out.acked = ack.acked; out.ackedOffset = ack.offset }
  } catch { /* none yet: everything is sent again */ }
  return out
}

function take (out: ScannedLog, record: LogRecord): void {
  switch (record.t) {
    case 'header': return
    case 'end':
      out.ended = true
      out.nextSeq = Math.max(out.nextSeq, record.nextSeq)
      return
    case 'continue':
      out.ended = false
      out.nextSeq = Math.max(out.nextSeq, record.nextSeq)
      return
    case 'step': {
      const { step } = record
      out.nextSeq = Math.max(out.nextSeq, step.seq + 1)
      if (!record.final) { out.open.set(step.seq, step); return }
      out.open.delete(step.seq)
      for (const r of recordedOf(step)) if (r.data !== undefined || r.blob !== undefined) out.recordedBytes += r.bytes
    }
  }
}
