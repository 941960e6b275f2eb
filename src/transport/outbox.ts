/**
 * The outgoing side of a link: frames are encoded at once, copied into a batch buffer the
 * outbox owns, and every frame queued within one tick of the event loop leaves as ONE WebSocket
 * message (several concatenated msgpack values; the receiver reads them with unpackMultiple).
 * One syscall and one ws frame per tick instead of per frame is most of the tell throughput.
 *
 * While no socket is attached (a client reconnecting, a server session waiting to be resumed)
 * batches wait in a queue and leave, in order, on the next socket. Everything held counts
 * towards `bufferedAmount`, bounded by a hard cap.
 */
import { WebSocket } from 'ws'
import { createError, ErrorCodes } from '../errors.js'
import type { Codec } from './codec.js'
import type { Frame } from './frames.js'

export interface OutboxOptions {
  codec: Codec
  /** Send a batch without waiting for the tick's end once it holds this many bytes. */
  batchBytes: number
  /** Hard cap on held bytes; a push beyond it throws WARREN_ERR_OVERLOADED. */
  maxBufferedBytes: number
  highWaterMark: number
  lowWaterMark: number
  /** Called once buffered bytes fall to the low-water mark after a push found them above the high-water mark. */
  onDrain: () => void
}

export interface Outbox {
  /** Bytes held: in the socket's buffers, in queued batches and in the batch being filled. */
  readonly bufferedAmount: number
  /** False while above the high-water mark (until the next drain). */
  readonly writable: boolean
  /**
   * Encodes and queues a frame.
   * @returns false when buffered bytes are above the high-water mark: back off until 'drain'
   * @throws WARREN_ERR_FRAME_TOO_LARGE, WARREN_ERR_INVALID_ARGUMENT (unencodable), WARREN_ERR_OVERLOADED (hard cap)
   */
  push (frame: Frame): boolean
  /** Starts sending on `socket` (which must be open): queued batches first, in order. */
  attach (socket: WebSocket): void
  /** Stops using the socket; later frames queue until the next `attach`. */
  detach (): void
  /** Hands the current batch to the socket now instead of at the tick's end (before a graceful close). */
  flushNow (): void
  /** Drops everything held (the link is closed for good). */
  clear (): void
}

const MIN_BATCH = 4096

class OutboxImpl implements Outbox {
  private socket: WebSocket | null = null
  private batch: Buffer | null = null
  private pos = 0
  private nextCapacity = MIN_BATCH
  private readonly queue: Buffer[] = []
  private queuedBytes = 0
  private scheduled: NodeJS.Immediate | null = null
  private needDrain = false

  constructor (private readonly o: OutboxOptions) {}

  get bufferedAmount (): number {
    return (this.socket === null ? 0 : this.socket.bufferedAmount) + this.queuedBytes + this.pos
  }

  get writable (): boolean {
    return !this.needDrain && this.bufferedAmount <= this.o.highWaterMark
  }

  push (frame: Frame): boolean {
    const bytes = this.o.codec.encodeShared(frame)
    const len = bytes.length
    const before = this.bufferedAmount
    if (before + len > this.o.maxBufferedBytes) {
      // Arm 'drain' as for a false return, so whoever was refused learns when to try again.
      this.needDrain = true
      throw createError(ErrorCodes.OVERLOADED, `link buffer full (${before} bytes held)`, { buffered: before, limit: this.o.maxBufferedBytes })
    }
    if (this.pos > 0 && this.pos + len > this.o.batchBytes) this.flushBatch()
    this.reserve(len)
    // The copy that makes the frame ours: `bytes` is msgpackr's scratch and dies with the next pack.
    this.batch!.set(bytes, this.pos)
    this.pos += len
    if (this.scheduled === null && this.socket !== null) this.scheduled = setImmediate(this.tick)
    if (before + len > this.o.highWaterMark) {
      this.needDrain = true
      return false
    }
    return true
  }

  attach (socket: WebSocket): void {
    this.socket = socket
    for (const b of this.queue.splice(0)) this.send(b)
    this.queuedBytes = 0
    if (this.pos > 0 && this.scheduled === null) this.scheduled = setImmediate(this.tick)
    this.checkDrain()
  }

  detach (): void {
    this.socket = null
  }

  flushNow (): void {
    if (this.scheduled !== null) clearImmediate(this.scheduled)
    this.scheduled = null
    this.flushBatch()
  }

  clear (): void {
    if (this.scheduled !== null) clearImmediate(this.scheduled)
    this.scheduled = null
    this.batch = null
    this.pos = 0
    this.queue.length = 0
    this.queuedBytes = 0
    this.needDrain = false
  }

  private reserve (len: number): void {
    if (this.batch === null) {
      this.batch = Buffer.allocUnsafe(Math.max(this.nextCapacity, len))
      return
    }
    if (this.pos + len <= this.batch.length) return
    const grown = Buffer.allocUnsafe(Math.max(this.batch.length * 2, this.pos + len))
    this.batch.copy(grown, 0, 0, this.pos)
    this.batch = grown
  }

  private readonly tick = (): void => {
    this.scheduled = null
    this.flushBatch()
  }

  /** Closes the current batch: sends it, or queues it while no open socket is attached. */
  private flushBatch (): void {
    if (this.pos === 0 || this.batch === null) return
    const msg = this.batch.subarray(0, this.pos)
    // Size the next batch after this one, so a quiet link does not allocate big buffers.
    this.nextCapacity = Math.min(Math.max(MIN_BATCH, this.pos), this.o.batchBytes)
    this.batch = null
    this.pos = 0
    if (this.socket !== null && this.socket.readyState === WebSocket.OPEN) {
      this.send(msg)
    } else {
      this.queue.push(msg)
      this.queuedBytes += msg.length
    }
  }

  private send (msg: Buffer): void {
    this.socket!.send(msg, { binary: true }, this.onSent)
  }

  /** ws calls this once a message left for the kernel (or failed): the moment buffered bytes shrink. */
  private readonly onSent = (): void => {
    this.checkDrain()
  }

  private checkDrain (): void {
    if (this.needDrain && this.bufferedAmount <= this.o.lowWaterMark) {
      this.needDrain = false
      this.o.onDrain()
    }
  }
}

/**
 * Creates the outbox of one link.
 * @param options the codec, the batch size and the buffering limits
 */
export function createOutbox (options: OutboxOptions): Outbox {
  return new OutboxImpl(options)
}
