/**
 * The output of one command, kept as numbered chunks until the consumer has seen them.
 *
 * Reading is pulling: `read(fromSeq)` returns what there is from `fromSeq` on, and asking for
 * `fromSeq` acknowledges everything before it, which is then freed. That one rule gives credit
 * flow control (nothing is sent that was not asked for), bounded memory (what is held is counted
 * in the node's OutputPool, whose credit stops the producer when the buffer is full; freed bytes
 * are granted again), and resume after a dropped connection (ask again from the last number
 * seen + 1: no chunk lost, none duplicated).
 */
import type { ExecResult } from '../../backends/types.js'
import type { ExecCredit } from './output-pool.js'
import type { ExecMeter } from '../metrics/index.js'

export type StreamName = 'stdout' | 'stderr'

export interface OutputChunk {
  seq: number
  stream: StreamName
  data: Uint8Array
}

/** One pull's answer. `result` is set once the command has ended and every chunk was read. */
export interface OutputPage {
  chunks: OutputChunk[]
  /** The seq to ask for next. */
  nextSeq: number
  result?: ExecResult
  /**
   * How the command ended, while output is still to be read: the answer to a status read
   * (`maxBytes` 0), which a consumer holding all the output it will buffer sends to learn the
   * end without taking more.
   */
  ended?: ExecResult
}

export const ExecOutputDefaults = {
  /** Larger writes are kept as chunks of this size, so a page never has to carry one whole. */
  maxChunkBytes: 64 * 1024
}

export class ExecOutput {
  private chunks: OutputChunk[] = []
  private nextSeq = 0
  private result: ExecResult | undefined
  /** Why the command was refused before it ran: every read fails with it. */
  private failure: unknown
  private waiters: Array<{ fromSeq: number, maxBytes: number, resolve: (page: OutputPage) => void, reject: (err: unknown) => void }> = []
  /** Status reads waiting for the command to end. */
  private endWaiters: Array<() => void> = []
  /** When the consumer last pulled; finished outputs nobody reads are dropped after a while. */
  lastReadAt = Date.now()
  private readonly startedAt = Date.now()
  /** True once the meter was told of the end. */
  private metered = false
  /** Told what the consumer has for good (a resumable command's producer frees it then). */
  private ackListener: ((seq: number) => void) | undefined
  private acked: number

  /**
   * @param credit this command's share of the node's output buffer (held bytes are counted there)
   * @param meter the node's command counters: told of the start, the bytes, and the end (once)
   * @param firstSeq the seq of the first chunk: a command taken up after a node restart goes on
   *   numbering where its consumer had got to
   */
  constructor (private readonly credit?: ExecCredit, private readonly meter?: ExecMeter, firstSeq = 0) {
    this.nextSeq = firstSeq
    this.acked = firstSeq
    meter?.started()
  }

  /** Tells the meter the command ended, once, however it ended (so its count matches the starts). */
  private ended (durationMs: number): void {
    if (this.metered) return
    this.metered = true
    this.meter?.ended(durationMs)
  }

  /**
   * Registers who hears of acknowledgements: `ack(seq)` when the consumer has every chunk below
   * seq; once it has the end too (or the output is dropped), a seq past the last chunk.
   */
  onAck (ack: (seq: number) => void): void {
    this.ackListener = ack
  }

  /** The seq the next chunk gets. */
  get seq (): number { return this.nextSeq }

  /** Appends a chunk and wakes readers waiting for it. */
  append (stream: StreamName, data: Uint8Array): void {
    if (data.byteLength === 0) return
    const step = ExecOutputDefaults.maxChunkBytes
    for (let at = 0; at < data.byteLength; at += step) {
      this.chunks.push({ seq: this.nextSeq++, stream, data: data.subarray(at, at + step) })
    }
    this.credit?.used(data.byteLength)
    this.meter?.output(data.byteLength)
    this.wake()
  }

  /** Records how the command ended. */
  finish (result: ExecResult): void {
    this.ended(result.durationMs)
    this.result = result
    this.credit?.ended()
    this.wake()
  }

  /**
   * The command was refused before it ran (e.g. its cwd is not there): readers, waiting or to
   * come, fail with `err` instead of getting a page.
   */
  fail (err: unknown): void {
    this.failure = err
    this.ended(Date.now() - this.startedAt)
    this.result ??= { exitCode: 126, durationMs: 0, truncated: false }
    this.credit?.ended()
    const waiting = this.waiters
    this.waiters = []
    for (const w of waiting) w.reject(err)
    for (const w of [...this.endWaiters]) w()
  }

  /** Drops what is held and gives its space back to the node (nobody will read it any more). */
  dispose (): void {
    this.chunks = []
    this.credit?.close()
    // Nobody will read it any more: the producer may forget the command's end as well.
    if (this.result !== undefined) this.ackListener?.(this.nextSeq + 1)
    this.ackListener = undefined
  }

  get finished (): boolean { return this.result !== undefined }

  /** True once the command ended and the consumer acknowledged every chunk. */
  get drained (): boolean { return this.result !== undefined && this.chunks.length === 0 }

  /**
   * Returns the chunks from `fromSeq` (at most about `maxBytes`), waiting for at least one when
   * there are none yet. Everything before `fromSeq` counts as received and is freed.
   */
  read (fromSeq: number, maxBytes: number, waitMs: number): Promise<OutputPage> {
    this.lastReadAt = Date.now()
    if (this.failure !== undefined) return Promise.reject(this.failure)
    this.ack(fromSeq)
    if (maxBytes === 0) return this.status(fromSeq, waitMs)
    const page = this.page(fromSeq, maxBytes)
    if (page !== undefined) return Promise.resolve(page)
    return new Promise((resolve, reject) => {
      // A silent command must not hold a request open past the caller's timeout: after
      // `waitMs` the answer is an empty page and the consumer asks again.
      const waiter = {
        fromSeq,
        maxBytes,
        resolve: (p: OutputPage) => { clearTimeout(timer); resolve(p) },
        reject: (err: unknown) => { clearTimeout(timer); reject(err) }
      }
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter)
        resolve({ chunks: [], nextSeq: fromSeq })
      }, waitMs)
      this.waiters.push(waiter)
    })
  }

  /**
   * A status read: no chunks, and `ended` (or `result`, when nothing is left to read) as soon as
   * the command has ended, or an empty page after `waitMs`.
   */
  private status (fromSeq: number, waitMs: number): Promise<OutputPage> {
    const answer = (): OutputPage => {
      if (this.result === undefined) return { chunks: [], nextSeq: fromSeq }
      return fromSeq >= this.nextSeq ? { chunks: [], nextSeq: this.nextSeq, result: this.result } : { chunks: [], nextSeq: fromSeq, ended: this.result }
    }
    if (this.result !== undefined) return Promise.resolve(answer())
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer)
        this.endWaiters = this.endWaiters.filter((w) => w !== done)
        if (this.failure !== undefined) reject(this.failure)
        else resolve(answer())
      }
      const timer = setTimeout(done, waitMs)
      this.endWaiters.push(done)
    })
  }

  /** Answers every waiting reader (used when the sandbox goes away). */
  close (result: ExecResult): void {
    this.ended(Date.now() - this.startedAt)
    if (this.result === undefined) this.result = result
    this.credit?.ended()
    this.wake()
  }

  private ack (fromSeq: number): void {
    if (fromSeq > this.acked && fromSeq <= this.nextSeq) {
      this.acked = fromSeq
      this.ackListener?.(fromSeq)
    }
    let drop = 0
    let bytes = 0
    while (drop < this.chunks.length && this.chunks[drop]!.seq < fromSeq) bytes += this.chunks[drop++]!.data.byteLength
    if (drop === 0) return
    this.chunks = this.chunks.slice(drop)
    this.credit?.freed(bytes)
  }

  private page (fromSeq: number, maxBytes: number): OutputPage | undefined {
    const out: OutputChunk[] = []
    let bytes = 0
    for (const c of this.chunks) {
      if (c.seq < fromSeq) continue
      if (out.length > 0 && bytes + c.data.byteLength > maxBytes) break
      out.push(c)
      bytes += c.data.byteLength
    }
    const nextSeq = out.length > 0 ? out[out.length - 1]!.seq + 1 : Math.max(fromSeq, 0)
    const all = nextSeq >= this.nextSeq
    if (out.length > 0) return all && this.result !== undefined ? { chunks: out, nextSeq, result: this.result } : { chunks: out, nextSeq }
    if (this.result !== undefined) return { chunks: [], nextSeq: this.nextSeq, result: this.result }
    return undefined
  }

  private wake (): void {
    if (this.result !== undefined || this.failure !== undefined) for (const w of [...this.endWaiters]) w()
    if (this.waiters.length === 0) return
    const still: typeof this.waiters = []
    for (const w of this.waiters) {
      const page = this.page(w.fromSeq, w.maxBytes)
      if (page !== undefined) w.resolve(page)
      else still.push(w)
    }
    this.waiters = still
  }
}
