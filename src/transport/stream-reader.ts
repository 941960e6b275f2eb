/**
 * The consuming end of a stream. Pull-based: chunks are consumed when the application reads
 * them (`read()` or `for await`), and only consumption grants new credit, so the producer can
 * never have more than one window of bytes outstanding towards a slow reader.
 *
 * The reader acknowledges after consuming `streamAckFraction` of its window (one credit frame per
 * quarter window by default, not one per chunk) and when it reads the end. Its position
 * `[sid, lastSeq, ack, win]` is what a resumed session sends so the producer re-sends exactly the
 * chunks after `lastSeq`: nothing lost, nothing twice.
 */
import { createError, ErrorCodes, fromWireError, toWireError, type WarrenError, type WireError } from '../errors.js'
import type { StreamPosition } from './frames.js'
import type { StreamPort } from './stream-port.js'

export interface StreamReader extends AsyncIterable<Uint8Array> {
  /** Stream id (the producer's). */
  readonly id: number
  /** The actor address the producer opened the stream towards. */
  readonly to: string
  /** Plain data the producer sent with the open frame. */
  readonly meta: unknown
  /** Sequence number of the last chunk received. */
  readonly lastSeq: number
  /** Bytes received and not yet read. */
  readonly bufferedBytes: number
  /**
   * The next chunk, or null at the end of the stream.
   * @throws the producer's abort reason, WARREN_ERR_CONNECTION_CLOSED when the link died for good, or a protocol error
   */
  read (): Promise<Uint8Array | null>
  /** Abandons the stream; the producer stops. Pending reads resolve to null. */
  cancel (reason?: unknown): void
}

export interface StreamReaderOptions {
  windowBytes: number
  ackFraction: number
}

/** The link's side of a reader. */
export interface StreamReaderControl extends StreamReader {
  onData (seq: number, data: Uint8Array): void
  onEnd (seq: number, err: WireError | undefined): void
  /** The position to send in a resume exchange (counts as an acknowledgement). */
  position (): StreamPosition
  /** The link died for good (or the producer broke the protocol). */
  fail (err: WarrenError): void
}

interface Waiter {
  resolve: (chunk: Uint8Array | null) => void
  reject: (err: unknown) => void
}

class Reader implements StreamReaderControl {
  private queue: Uint8Array[] = []
  private head = 0
  private queued = 0
  private received = 0
  private consumed = 0
  private acked = 0
  /** Bytes received after the last acknowledgement: what the producer believes is outstanding, at most. */
  private outstanding = 0
  private consumedSinceAck = 0
  private endSeq = 0
  private endErr: WireError | undefined
  private waiters: Waiter[] = []
  private done = false
  private error: WarrenError | undefined

  constructor (
    readonly id: number,
    readonly to: string,
    readonly meta: unknown,
    private readonly port: StreamPort,
    private readonly o: StreamReaderOptions
  ) {
    this.sendCredit()
  }

  get lastSeq (): number { return this.received }
  get bufferedBytes (): number { return this.queued }

  read (): Promise<Uint8Array | null> {
    if (this.head < this.queue.length) return Promise.resolve(this.take())
    if (this.endSeq > 0) return this.finish()
    if (this.done) return this.error === undefined ? Promise.resolve(null) : Promise.reject(this.error)
    return new Promise((resolve, reject) => { this.waiters.push({ resolve, reject }) })
  }

  cancel (reason?: unknown): void {
    if (this.done) return
    const err = reason === undefined ? undefined : toWireError(reason)
    this.close(undefined)
    try {
      this.port.push(err === undefined ? { k: 'cancel', sid: this.id } : { k: 'cancel', sid: this.id, err })
    } catch { /* the link is gone or full; the producer learns on resume that we dropped the stream */ }
  }

  [Symbol.asyncIterator] (): AsyncIterator<Uint8Array> {
    return {
      next: async () => {
        const chunk = await this.read()
        return chunk === null ? { done: true, value: undefined } : { done: false, value: chunk }
      },
      // `break` out of a for-await loop lands here: the consumer lost interest.
      return: async () => {
        this.cancel()
        return { done: true, value: undefined }
      }
    }
  }

  onData (seq: number, data: Uint8Array): void {
    if (this.done || seq <= this.received) return
    if (seq !== this.received + 1 || this.endSeq > 0) {
      this.violate(`data ${seq} after ${this.received}${this.endSeq > 0 ? ' (past the end)' : ''}`)
      return
    }
    // The producer may only exceed the window with a single chunk sent while nothing was outstanding.
    if (this.outstanding > 0 && this.outstanding + data.length > this.o.windowBytes) {
      this.violate(`credit exceeded: ${this.outstanding + data.length} bytes outstanding, window ${this.o.windowBytes}`)
      return
    }
    this.received = seq
    this.outstanding += data.length
    const w = this.waiters.shift()
    if (w !== undefined) {
      this.consume(data)
      w.resolve(data)
      return
    }
    this.queue.push(data)
    this.queued += data.length
  }

  onEnd (seq: number, err: WireError | undefined): void {
    if (this.done || seq <= this.received) return
    if (seq !== this.received + 1 || this.endSeq > 0) {
      this.violate(`end ${seq} after ${this.received}`)
      return
    }
    this.received = seq
    this.endSeq = seq
    this.endErr = err
    if (this.waiters.length > 0) {
      const ws = this.waiters.splice(0)
      const result = this.finish()
      for (const w of ws) result.then(w.resolve, w.reject)
    }
  }

  position (): StreamPosition {
    this.markAcked()
    return [this.id, this.received, this.acked, this.o.windowBytes]
  }

  fail (err: WarrenError): void {
    this.close(err)
  }

  private take (): Uint8Array {
    const chunk = this.queue[this.head]!
    this.queue[this.head++] = undefined as unknown as Uint8Array
    if (this.head === this.queue.length) {
      this.queue = []
      this.head = 0
    }
    this.queued -= chunk.length
    this.consume(chunk)
    return chunk
  }

  private consume (chunk: Uint8Array): void {
    this.consumed++
    this.consumedSinceAck += chunk.length
    if (this.consumedSinceAck >= this.o.windowBytes * this.o.ackFraction) this.sendCredit()
  }

  /** Every chunk was read; now the end itself is consumed and acknowledged. */
  private finish (): Promise<Uint8Array | null> {
    if (!this.done) {
      this.consumed = this.endSeq
      this.sendCredit()
      this.close(this.endErr === undefined ? undefined : fromWireError(this.endErr))
    }
    return this.error === undefined ? Promise.resolve(null) : Promise.reject(this.error)
  }

  private markAcked (): void {
    this.acked = this.consumed
    this.outstanding -= this.consumedSinceAck
    this.consumedSinceAck = 0
  }

  private sendCredit (): void {
    this.markAcked()
    try {
      this.port.push({ k: 'credit', sid: this.id, ack: this.acked, win: this.o.windowBytes })
    } catch { /* only when the link is over its hard cap or closed; the resume position re-sends the ack */ }
  }

  private violate (what: string): void {
    const err = createError(ErrorCodes.PROTOCOL_VIOLATION, `stream ${this.id}: ${what}`)
    this.close(err)
    try { this.port.push({ k: 'cancel', sid: this.id, err: toWireError(err) }) } catch { /* link gone */ }
  }

  private close (err: WarrenError | undefined): void {
    if (this.done) return
    this.done = true
    this.error = err
    this.queue = []
    this.head = 0
    this.queued = 0
    this.port.release('reader', this.id)
    const ws = this.waiters.splice(0)
    for (const w of ws) {
      if (err === undefined) w.resolve(null)
      else w.reject(err)
    }
  }
}

/**
 * Creates a reader and sends its first credit.
 * @param id the producer's stream id
 * @param to target actor address from the open frame
 * @param meta plain data from the open frame
 * @param port the link
 * @param options window and acknowledgement fraction
 */
export function createStreamReader (id: number, to: string, meta: unknown, port: StreamPort, options: StreamReaderOptions): StreamReaderControl {
  return new Reader(id, to, meta, port, options)
}
