/**
 * One upload into a sandbox: chunks by offset, in whatever order the connection delivers them,
 * checked against the cluster's bounds, hashed (sha256) in order, and handed to a sink (a file
 * written by offset, or a tar unpacked as it comes). The upload holds no more of the data than
 * the chunks that arrived ahead of a gap, and those are bounded by `uploadWindowBytes`.
 */
import { createHash, type Hash } from 'node:crypto'
import { createError, ErrorCodes } from '../../errors.js'
import type { FilesLimits, UploadResult } from './file-requests.js'

/** Where an upload's bytes go. */
export interface UploadSink {
  /**
   * Takes one chunk: `data` at `offset` as it came (possibly again, possibly out of order), and
   * `ordered`, the bytes this chunk made contiguous, in order (nothing when it filled no gap).
   * Calls are made in the order the chunks arrived; a sink that needs order uses `ordered`.
   */
  take (offset: number, data: Uint8Array, ordered: Uint8Array[]): Promise<void>
  /** All bytes arrived and were checked: make the result visible (rename into place, end the tar). */
  finish (): Promise<void>
  /** The upload failed or was given up: remove what it left. Never throws. */
  abort (): Promise<void>
}

/** The refusal of a size past the cluster's maximum, naming `size`. */
export function tooLarge (size: number, max: number): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, `size ${size} exceeds the maximum file size of ${max} bytes`, { field: 'size', max })
}

export class Upload {
  /** Bytes received in order from 0 (and hashed). */
  private received = 0
  private readonly hash: Hash = createHash('sha256')
  /** Chunks that arrived ahead of a gap, by offset, kept until it is filled. */
  private readonly ahead = new Map<number, Uint8Array>()
  private aheadBytes = 0
  private readonly writing = new Set<Promise<void>>()
  private failure: Error | undefined
  /** When a request last touched it (idle uploads are dropped). */
  lastAt = Date.now()

  constructor (readonly id: string, readonly path: string, private readonly sink: UploadSink, private readonly limits: FilesLimits) {}

  /** How far the upload has come: where a client resuming it goes on from. */
  get offset (): number { return this.received }

  /**
   * Takes a chunk at `offset`; resolves once its sink has it (the client's backpressure).
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `size` past the maximum, `data` past the chunk
   *   bound, `offset` too far ahead of what arrived in order; whatever the sink failed with before
   */
  async chunk (offset: number, data: Uint8Array): Promise<{ received: number }> {
    this.lastAt = Date.now()
    if (this.failure !== undefined) throw this.failure
    if (data.length > this.limits.maxChunkBytes) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `a chunk holds at most ${this.limits.maxChunkBytes} bytes`, { field: 'data', max: this.limits.maxChunkBytes })
    }
    const end = offset + data.length
    if (end > this.limits.maxFileBytes) throw tooLarge(end, this.limits.maxFileBytes)
    const ordered: Uint8Array[] = []
    if (offset <= this.received) {
      if (end > this.received) this.advance(data.subarray(this.received - offset), ordered)
      this.drainAhead(ordered)
    } else if (!this.ahead.has(offset)) {
      if (offset - this.received > this.limits.uploadWindowBytes || this.aheadBytes + data.length > this.limits.uploadWindowBytes) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, `offset ${offset} is too far ahead of the ${this.received} bytes received in order`, { field: 'offset', received: this.received })
      }
      this.ahead.set(offset, data)
      this.aheadBytes += data.length
    }
    // Handed to the sink before any await, so the sink sees chunks in arrival order.
    const work = this.sink.take(offset, data, ordered)
    this.writing.add(work)
    try {
      await work
    } catch (err) {
      this.failure ??= err instanceof Error ? err : new Error(String(err))
      throw this.failure
    } finally {
      this.writing.delete(work)
    }
    return { received: this.received }
  }

  /**
   * Closes the upload once every chunk has landed: the size (and the sha256, when given) must be
   * what arrived, then the sink makes the result visible.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `size` or `sha256` on a mismatch
   */
  async end (size: number, sha256: string | undefined): Promise<UploadResult> {
    this.lastAt = Date.now()
    while (this.writing.size > 0) await Promise.allSettled([...this.writing])
    if (this.failure !== undefined) throw this.failure
    if (size > this.limits.maxFileBytes) throw tooLarge(size, this.limits.maxFileBytes)
    if (this.received !== size || this.ahead.size > 0) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `size ${size} is not what arrived: ${this.received} bytes in order${this.ahead.size > 0 ? ' and chunks after a gap' : ''}`, { field: 'size', received: this.received })
    }
    const digest = this.hash.digest('hex')
    if (sha256 !== undefined && sha256.toLowerCase() !== digest) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `sha256 ${sha256} is not that of the bytes that arrived (${digest})`, { field: 'sha256', sha256: digest })
    }
    await this.sink.finish()
    return { size, sha256: digest }
  }

  /** Gives the upload up and removes what it left. */
  async abort (): Promise<void> {
    this.failure ??= createError(ErrorCodes.INVALID_ARGUMENT, `upload ${this.id} was given up`, { field: 'upload' })
    await Promise.allSettled([...this.writing])
    await this.sink.abort()
  }

  private advance (fresh: Uint8Array, ordered: Uint8Array[]): void {
    this.hash.update(fresh)
    ordered.push(fresh)
    this.received += fresh.length
  }

  /** Chunks held ahead that now join the bytes in order. */
  private drainAhead (ordered: Uint8Array[]): void {
    for (let moved = true; moved && this.ahead.size > 0;) {
      moved = false
      for (const [offset, data] of this.ahead) {
        if (offset > this.received) continue
        this.ahead.delete(offset)
        this.aheadBytes -= data.length
        const end = offset + data.length
        if (end > this.received) this.advance(data.subarray(this.received - offset), ordered)
        moved = true
      }
    }
  }
}
