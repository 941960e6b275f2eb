/**
 * StdinPipe: a running command's standard input, written by the trainer a piece at a time and
 * read by the backend as an async iterable.
 *
 * Writes carry the byte offset they start at, so a write retried after a dropped connection is
 * recognised and taken once (exactly-once, like output's sequence numbers). The pipe holds at
 * most `maxBufferedBytes` the command has not read yet: beyond that a write is refused with
 * WARREN_ERR_OVERLOADED and a retry-after hint, which is the writer's backpressure.
 */
import { createError, ErrorCodes } from '../../errors.js'

export const StdinDefaults = {
  maxBufferedBytes: 1024 * 1024,
  /** Suggested wait before a refused write is tried again. */
  retryAfterMs: 20
}

/** What a write answers: the bytes taken so far, and whether the command still reads. */
export interface StdinAck { received: number, closed: boolean }

export class StdinPipe implements AsyncIterable<Uint8Array> {
  private readonly chunks: Uint8Array[] = []
  private buffered = 0
  private receivedBytes = 0
  private ended = false
  /** The command stopped reading (it ended): later writes go nowhere. */
  private closed = false
  private wake: (() => void) | undefined

  constructor (private readonly maxBufferedBytes = StdinDefaults.maxBufferedBytes) {}

  /**
   * Takes `data` written at `offset` and, with `eof`, ends the input once everything before it
   * has arrived. Bytes already taken (a retry) are skipped; a gap is refused.
   */
  write (offset: unknown, data: unknown, eof: unknown): StdinAck {
    if (typeof offset !== 'number' || !Number.isInteger(offset) || offset < 0) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'offset must be an integer >= 0', { field: 'offset' })
    }
    if (data !== undefined && !(data instanceof Uint8Array)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'data must be bytes', { field: 'data' })
    if (this.closed) return this.ack()
    if (offset > this.receivedBytes) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `stdin offset ${offset} is past the ${this.receivedBytes} bytes received`, { field: 'offset', received: this.receivedBytes })
    }
    const end = offset + (data?.length ?? 0)
    if (data !== undefined && end > this.receivedBytes) {
      const fresh = data.subarray(this.receivedBytes - offset)
      if (this.buffered + fresh.length > this.maxBufferedBytes) {
        throw createError(ErrorCodes.OVERLOADED, 'the command has not read its stdin yet', { retryAfterMs: StdinDefaults.retryAfterMs, received: this.receivedBytes })
      }
      // Copied: the message's buffer may be reused by the decoder.
      this.chunks.push(new Uint8Array(fresh))
      this.buffered += fresh.length
      this.receivedBytes = end
    }
    if (eof === true && end === this.receivedBytes) this.ended = true
    this.notify()
    return this.ack()
  }

  /** The command ended: stop the reader and drop what it did not read. */
  close (): void {
    this.closed = true
    this.ended = true
    this.chunks.length = 0
    this.buffered = 0
    this.notify()
  }

  async * [Symbol.asyncIterator] (): AsyncIterator<Uint8Array> {
    try {
      for (;;) {
        const chunk = this.chunks.shift()
        if (chunk !== undefined) {
          this.buffered -= chunk.length
          yield chunk
          continue
        }
        if (this.ended) return
        await new Promise<void>((resolve) => { this.wake = resolve })
      }
    } finally {
      this.closed = true
    }
  }

  /** Bytes taken so far. */
  get received (): number { return this.receivedBytes }

  private ack (): StdinAck { return { received: this.receivedBytes, closed: this.closed } }

  private notify (): void {
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }
}
