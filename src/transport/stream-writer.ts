/**
 * The producing end of a stream.
 *
 * Credit is counted in payload BYTES. The consumer's credit frame `{ack, win}` says "I consumed
 * through sequence number `ack`; you may have up to `win` bytes sent but not yet consumed". The
 * producer keeps every chunk it sent until it is acknowledged: that replay buffer is what a
 * resumed session re-sends from, and it can never exceed the window (plus one chunk when a single
 * chunk is larger than the whole window).
 *
 * `write` returns false when the credit is used up or the link's buffered bytes are above the
 * high-water mark; 'drain' follows once there is credit again and the link is under the
 * low-water mark. A producer that keeps writing after false gets `streamOverrunBytes` of grace,
 * then `write` throws WARREN_ERR_OVERLOADED: a slow consumer can never grow the producer's memory
 * without bound.
 */
import { EventEmitter } from 'node:events'
import { createError, ErrorCodes, fromWireError, isWarrenError, toWireError, type WarrenError, type WireError } from '../errors.js'
import type { Frame, StreamPosition } from './frames.js'
import type { StreamPort } from './stream-port.js'

export interface StreamWriterEvents {
  /** Writing may continue: credit is available and the link is under its low-water mark. */
  drain: []
  /** The consumer consumed everything, end included. */
  finish: []
  /** The writer is done: after 'finish' (no error), or cancelled, aborted, or its link closed for good. */
  close: [error: WarrenError | undefined]
}

export interface StreamWriter extends EventEmitter<StreamWriterEvents> {
  /** Stream id, unique per link and direction. */
  readonly id: number
  /** The actor address the stream was opened towards. */
  readonly to: string
  /** Bytes held by this producer: sent but unacknowledged (the replay buffer) plus not yet sent. */
  readonly bufferedBytes: number
  /** Bytes that may still be written before `write` returns false for lack of credit. */
  readonly credit: number
  /** Sequence number of the last chunk handed to the link. */
  readonly seq: number
  /** True after `write` returned false and until 'drain'. */
  readonly needDrain: boolean
  /** True once 'close' was emitted. */
  readonly closed: boolean
  /**
   * Queues a chunk (split into frames of at most `streamChunkBytes`). The stream keeps a
   * reference to `chunk` until the consumer acknowledged it: do not modify it afterwards.
   * @returns false when the producer should wait for 'drain'
   * @throws WARREN_ERR_OVERLOADED when writing on far past false; the close error after 'close'; WARREN_ERR_INVALID_ARGUMENT after `end`
   */
  write (chunk: Uint8Array): boolean
  /** Ends the stream after everything written. Idempotent. */
  end (): void
  /**
   * Ends the stream with an error: everything written so far is still delivered, then the
   * reader's next read rejects with `reason` (default WARREN_ERR_STREAM_CANCELLED). No more writes.
   */
  destroy (reason?: unknown): void
}

interface Sent { seq: number, data: Uint8Array }

export interface StreamWriterOptions {
  chunkBytes: number
  overrunBytes: number
}

/** The link's side of a writer: what frames and the resume exchange do to it. */
export interface StreamWriterControl extends StreamWriter {
  onCredit (ack: number, win: number): void
  onCancel (err: WireError | undefined): void
  /** After a reattach: `pos` is the consumer's position, undefined when the consumer did not list the stream. */
  onResume (pos: StreamPosition | undefined): void
  /** The link died for good. */
  fail (err: WarrenError): void
  /** The link's buffered bytes fell under the low-water mark. */
  pump (): void
}

class Writer extends EventEmitter<StreamWriterEvents> implements StreamWriterControl {
  private sent: Sent[] = []
  private sentHead = 0
  private sentBytes = 0
  private pending: Uint8Array[] = []
  private pendingHead = 0
  private pendingBytes = 0
  private lastSeq = 0
  private ack = 0
  private window = 0
  private credited = false
  private opened = false
  private ending = false
  private endSeq = 0
  /** After a resume: the next sequence number to send again from the replay buffer (0: none). */
  private resendSeq = 0
  /** After a resume: the end frame must go out again once the replay is done. */
  private endAgain = false
  private endErr: WireError | undefined
  private drainWanted = false
  private closeError: WarrenError | undefined
  private isClosed = false
  /** Done internally too (end acknowledged, cancelled, or the link died); `isClosed` may come earlier, on destroy. */
  private released = false

  constructor (
    readonly id: number,
    readonly to: string,
    private readonly meta: unknown,
    private readonly port: StreamPort,
    private readonly o: StreamWriterOptions
  ) {
    super()
    if (port.live) {
      // Called from openStream: an open that cannot go (meta too large, link overloaded) throws to the caller.
      port.push(this.openFrame())
      this.opened = true
    }
  }

  get bufferedBytes (): number { return this.sentBytes + this.pendingBytes }
  get credit (): number { return this.window - this.sentBytes - this.pendingBytes }
  get seq (): number { return this.lastSeq }
  get needDrain (): boolean { return this.drainWanted }
  get closed (): boolean { return this.isClosed }

  write (chunk: Uint8Array): boolean {
    if (this.isClosed) throw this.closeError ?? createError(ErrorCodes.INVALID_ARGUMENT, `stream ${this.id} is closed`)
    if (this.ending) throw createError(ErrorCodes.INVALID_ARGUMENT, `write after end on stream ${this.id}`)
    if (!(chunk instanceof Uint8Array)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'a stream chunk must be a Uint8Array')
    if (this.drainWanted && this.bufferedBytes + chunk.length > Math.max(this.window, 0) + this.o.overrunBytes) {
      throw createError(ErrorCodes.OVERLOADED, `stream ${this.id}: writing on after write() returned false`, {
        buffered: this.bufferedBytes, window: this.window, overrun: this.o.overrunBytes
      })
    }
    for (let off = 0; off < chunk.length; off += this.o.chunkBytes) {
      // subarray, not a copy: the frame encoder copies once into the outgoing batch.
      const piece = off === 0 && chunk.length <= this.o.chunkBytes ? chunk : chunk.subarray(off, off + this.o.chunkBytes)
      this.pending.push(piece)
      this.pendingBytes += piece.length
    }
    this.pump()
    const ok = this.credit > 0 && this.port.writable
    if (!ok) this.drainWanted = true
    return ok
  }

  end (): void {
    if (this.ending || this.isClosed) return
    this.ending = true
    this.pump()
  }

  destroy (reason?: unknown): void {
    if (this.isClosed) return
    const err = fromWireError(toWireError(reason === undefined
      ? createError(ErrorCodes.STREAM_CANCELLED, `stream ${this.id} aborted by its producer`)
      : reason))
    this.ending = true
    // An end already on the wire stays clean (everything before it was sent); otherwise the end carries the reason.
    if (this.endSeq === 0) this.endErr = toWireError(err)
    // What was written is still delivered (a dying command's last output matters most), then the error.
    // The writer stays registered until the consumer acknowledges the end, so the abort survives a reconnect.
    this.pump()
    this.closeForCaller(err)
  }

  pump (): void {
    if (this.released || !this.port.live) return
    if (!this.opened) {
      try {
        this.port.push(this.openFrame())
      } catch (err) {
        // Overloaded: the next drain retries. Anything else (meta too large to encode) never will.
        if (isWarrenError(err, ErrorCodes.OVERLOADED)) return
        this.finishClose(fromWireError(toWireError(err)))
        return
      }
      this.opened = true
    }
    // First what the consumer lacks after a resume, in order and under backpressure; new chunks wait.
    while (this.resendSeq !== 0) {
      if (this.sentHead === this.sent.length) { this.resendSeq = 0; break }
      const first = this.sent[this.sentHead]!.seq
      if (this.resendSeq < first) this.resendSeq = first // acknowledged meanwhile: the consumer has them
      const i = this.sentHead + (this.resendSeq - first)
      if (i >= this.sent.length) { this.resendSeq = 0; break }
      if (!this.port.writable) return this.maybeDrain()
      const s = this.sent[i]!
      if (!this.tryPush({ k: 'data', sid: this.id, seq: s.seq, d: s.data })) return
      this.resendSeq = i + 1 < this.sent.length ? s.seq + 1 : 0
    }
    while (this.pendingHead < this.pending.length) {
      if (!this.port.writable) break
      const data = this.pending[this.pendingHead]!
      // One chunk larger than the whole window may go when nothing is in flight, or nothing would ever move.
      const fits = this.window > 0 && (this.sentBytes + data.length <= this.window || this.sentBytes === 0)
      if (!fits) break
      const seq = this.lastSeq + 1
      if (!this.tryPush({ k: 'data', sid: this.id, seq, d: data })) break
      this.lastSeq = seq
      this.pending[this.pendingHead++] = undefined as unknown as Uint8Array
      this.pendingBytes -= data.length
      this.sent.push({ seq, data })
      this.sentBytes += data.length
    }
    if (this.pendingHead === this.pending.length && this.pendingHead > 0) {
      this.pending = []
      this.pendingHead = 0
    }
    if (this.ending && this.pendingHead === this.pending.length) {
      if (this.endSeq === 0) {
        if (this.tryPush(this.endFrame(this.lastSeq + 1))) this.endSeq = ++this.lastSeq
      } else if (this.endAgain) {
        if (this.tryPush(this.endFrame(this.endSeq))) this.endAgain = false
      }
    }
    this.maybeDrain()
  }

  onCredit (ack: number, win: number): void {
    if (this.applyCredit(ack, win)) this.pump()
  }

  /** Drops what `ack` acknowledges and takes the new window; false when that finished the stream (or it was over). */
  private applyCredit (ack: number, win: number): boolean {
    if (this.released) return false
    // An ack beyond what we sent is a confused or hostile peer; ignoring it keeps our buffer intact.
    if (ack > this.lastSeq) return true
    this.credited = true
    this.window = win
    if (ack > this.ack) {
      this.ack = ack
      while (this.sentHead < this.sent.length && this.sent[this.sentHead]!.seq <= ack) {
        this.sentBytes -= this.sent[this.sentHead]!.data.length
        this.sent[this.sentHead++] = undefined as unknown as Sent
      }
      if (this.sentHead === this.sent.length) {
        this.sent = []
        this.sentHead = 0
      } else if (this.sentHead > 1024) {
        this.sent = this.sent.slice(this.sentHead)
        this.sentHead = 0
      }
    }
    if (this.endSeq > 0 && ack >= this.endSeq) {
      this.finishClose(this.endErr === undefined ? undefined : fromWireError(this.endErr), this.endErr === undefined)
      return false
    }
    return true
  }

  onCancel (err: WireError | undefined): void {
    this.finishClose(err === undefined
      ? createError(ErrorCodes.STREAM_CANCELLED, `stream ${this.id} cancelled by its consumer`)
      : fromWireError(err))
  }

  onResume (pos: StreamPosition | undefined): void {
    if (pos === undefined) {
      if (this.opened && this.credited) {
        if (this.endSeq > 0 && this.endErr === undefined) {
          // The consumer dropped the stream after the end went out: it read to the end and its final ack was lost.
          this.finishClose(undefined, true)
        } else {
          this.finishClose(createError(ErrorCodes.STREAM_CANCELLED, `stream ${this.id} unknown to the consumer after resume`))
        }
        return
      }
      // Never opened, or the open died with the old socket (no credit ever came, so no data went
      // either): open (again), then the end if there was one. An empty stream whose open AND final
      // ack were both lost is the one case delivered twice.
      this.opened = false
      this.endAgain = this.endSeq > 0
      this.pump()
      return
    }
    const [, received, ack, win] = pos
    if (received > this.lastSeq || received < this.ack) {
      this.finishClose(createError(ErrorCodes.STREAM_RESUME_GAP, `stream ${this.id}: consumer at ${received}, producer holds ${this.ack + 1}..${this.lastSeq}`, {
        received, acked: this.ack, last: this.lastSeq
      }))
      return
    }
    // Credit first (it may finish the stream), then the replay, then new chunks: order is the point.
    if (!this.applyCredit(Math.max(ack, this.ack), win)) return
    this.resendSeq = this.sentHead < this.sent.length && this.sent[this.sent.length - 1]!.seq > received ? received + 1 : 0
    this.endAgain = this.endSeq > received
    this.pump()
  }

  fail (err: WarrenError): void {
    this.finishClose(err)
  }

  private openFrame (): Frame {
    return this.meta === undefined ? { k: 'open', sid: this.id, to: this.to } : { k: 'open', sid: this.id, to: this.to, meta: this.meta }
  }

  private endFrame (seq: number): Frame {
    return this.endErr === undefined ? { k: 'end', sid: this.id, seq } : { k: 'end', sid: this.id, seq, err: this.endErr }
  }

  /**
   * Pushes a frame from an event path (credit, drain, resume), where throwing would escape into
   * a socket handler. A refused push (link over its hard cap) leaves the state untouched; the
   * link's next 'drain' pumps again.
   */
  private tryPush (frame: Frame): boolean {
    try {
      this.port.push(frame)
      return true
    } catch {
      return false
    }
  }

  private maybeDrain (): void {
    if (this.drainWanted && !this.isClosed && this.credit > 0 && this.port.writable) {
      this.drainWanted = false
      this.emit('drain')
    }
  }

  /** Tells the caller the writer is done, while it may still wait internally for the end's ack. */
  private closeForCaller (err: WarrenError | undefined): void {
    if (this.isClosed) return
    this.isClosed = true
    this.closeError = err
    this.drainWanted = false
    this.emit('close', err)
  }

  /** Done on every level: buffers dropped, the link forgets the id. */
  private finishClose (err: WarrenError | undefined, finished = false): void {
    if (this.released) return
    this.released = true
    this.sent = []
    this.sentHead = 0
    this.sentBytes = 0
    this.pending = []
    this.pendingHead = 0
    this.pendingBytes = 0
    this.endSeq = 0
    this.port.release('writer', this.id)
    if (finished && !this.isClosed) this.emit('finish')
    this.closeForCaller(err)
  }
}

/**
 * Creates a writer; the link registers it under `id` before anything arrives for it.
 * @param id stream id (the producer's)
 * @param to target actor address
 * @param meta plain data sent with the open frame
 * @param port the link
 * @param options chunk size and overrun grace
 */
export function createStreamWriter (id: number, to: string, meta: unknown, port: StreamPort, options: StreamWriterOptions): StreamWriterControl {
  return new Writer(id, to, meta, port, options)
}
