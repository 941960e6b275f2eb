/**
 * Recording a stream of bytes (a command's output or stdin, a file's content) for a step, as it
 * flows: counted and hashed always; kept whole while the sandbox's record budget has room —
 * inline up to `inlineBytes`, beyond that in a file on the node, pushed to the blob store when
 * the stream ends — and otherwise only its head and tail. Memory per stream stays bounded
 * (inline bytes, head and tail); the rest is on disk.
 */
import { createHash } from 'node:crypto'
import { closeSync, openSync, rmSync, writeSync } from 'node:fs'
import { ErrorCodes, isWarrenError } from '../../errors.js'
import type { BlobKind } from '../../images/index.js'
import { TrajectoryDefaults, type RecordedBytes } from './types.js'

export const RecordPushDefaults = {
  /** Tries of a push that failed (the control plane restarting); past them the bytes are kept as head and tail. */
  attempts: 5,
  retryMs: 1000
}

/** Puts a file into the control plane's blob store (`args.pushBlob`). */
export type PushBlob = (file: string, kind: BlobKind) => Promise<{ digest: string, bytes: number }>

/** The bytes a sandbox may keep whole, shared by all its streams. */
export class RecordBudget {
  constructor (readonly max: number, public used = 0) {}

  /** Takes `n` bytes of the budget, or nothing when they do not fit. */
  take (n: number): boolean {
    if (this.used + n > this.max) return false
    this.used += n
    return true
  }

  /** Gives `n` bytes back (a stream no longer kept whole, or let go). */
  give (n: number): void { this.used = Math.max(0, this.used - n) }
}

type Limits = Pick<typeof TrajectoryDefaults, 'inlineBytes' | 'headBytes' | 'tailBytes'>

export class BytesRecorder {
  private readonly hash = createHash('sha256')
  private total = 0
  /** Of the budget, what this stream holds whole. */
  private charged = 0
  private whole = true
  private inline: Buffer[] = []
  private inlineLength = 0
  private readonly head: Buffer[] = []
  private headLength = 0
  /** The last bytes after the head, at most `tailBytes` beyond the first chunk. */
  private tail: Buffer[] = []
  private tailLength = 0
  private fd: number | undefined
  private file: string | undefined
  private done = false
  private digest: string | undefined

  /**
   * @param spillPath a fresh file path on the node, for bytes beyond `inlineBytes`
   */
  constructor (private readonly budget: RecordBudget, private readonly spillPath: () => string, private readonly limits: Limits = TrajectoryDefaults) {}

  /** Bytes taken so far. */
  get bytes (): number { return this.total }

  /** Takes the next bytes of the stream (copied where kept: the caller may reuse its buffer). */
  write (chunk: Uint8Array): void {
    if (this.done || chunk.length === 0) return
    this.hash.update(chunk)
    this.total += chunk.length
    const toHead = Math.min(this.limits.headBytes - this.headLength, chunk.length)
    if (toHead > 0) { this.head.push(Buffer.from(chunk.subarray(0, toHead))); this.headLength += toHead }
    if (chunk.length > toHead) this.keepTail(chunk.subarray(Math.max(toHead, chunk.length - this.limits.tailBytes)))
    if (!this.whole) return
    if (!this.budget.take(chunk.length)) { this.cut(); return }
    this.charged += chunk.length
    try {
      if (this.fd === undefined && this.inlineLength + chunk.length > this.limits.inlineBytes) this.spill()
      if (this.fd !== undefined) writeAll(this.fd, chunk)
      else { this.inline.push(Buffer.from(chunk)); this.inlineLength += chunk.length }
    } catch {
      this.cut() // the node's disk refused: what is left is the head and the tail
    }
  }

  /** Ends the stream's bytes (later writes are ignored) and answers the sha256 of all of them, hex. */
  seal (): string {
    this.done = true
    this.digest ??= this.hash.digest('hex')
    return this.digest
  }

  /**
   * Ends the stream: what a step carries of it. Bytes beyond `inlineBytes` (all of them, with
   * `toBlob`) are pushed to the blob store first; a push that fails leaves head and tail.
   */
  async finish (push: PushBlob | undefined, toBlob = false): Promise<RecordedBytes> {
    const sha256 = this.seal()
    try {
      if (this.whole && this.fd === undefined && !(toBlob && push !== undefined && this.total > 0)) {
        return { bytes: this.total, sha256, data: Buffer.concat(this.inline, this.inlineLength) }
      }
      if (this.whole && push !== undefined) {
        try {
          if (this.fd === undefined) this.spill()
          closeSync(this.fd!)
          this.fd = undefined
          const pushed = await pushWithRetries(push, this.file!)
          return { bytes: this.total, sha256, blob: pushed.digest }
        } catch {
          this.cut()
        }
      }
      this.cut()
      const tail = Buffer.concat(this.tail, this.tailLength)
      return {
        bytes: this.total, sha256, head: Buffer.concat(this.head, this.headLength),
        ...(tail.length > 0 ? { tail: tail.subarray(Math.max(0, tail.length - this.limits.tailBytes)) } : {})
      }
    } finally {
      this.removeFile()
      this.inline = []
    }
  }

  /** The stream is not recorded after all (an upload given up): its budget and its file go. */
  discard (): void {
    this.done = true
    this.cut()
  }

  private keepTail (piece: Uint8Array): void {
    this.tail.push(Buffer.from(piece))
    this.tailLength += piece.length
    while (this.tail.length > 1 && this.tailLength - this.tail[0]!.length >= this.limits.tailBytes) this.tailLength -= this.tail.shift()!.length
  }

  private spill (): void {
    this.file = this.spillPath()
    this.fd = openSync(this.file, 'w', 0o600)
    for (const b of this.inline) writeAll(this.fd, b)
    this.inline = []
    this.inlineLength = 0
  }

  /** No longer kept whole: its share of the budget goes back, its bytes on disk too. */
  private cut (): void {
    if (!this.whole) return
    this.whole = false
    this.budget.give(this.charged)
    this.charged = 0
    this.inline = []
    this.inlineLength = 0
    this.removeFile()
  }

  private removeFile (): void {
    if (this.fd !== undefined) { try { closeSync(this.fd) } catch {} this.fd = undefined }
    if (this.file !== undefined) { rmSync(this.file, { force: true }); this.file = undefined }
  }
}

function writeAll (fd: number, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at, bytes.length - at)
}

/** A refusal that may pass: the store unreachable or busy (not one that keeps no blob store, or a key it refuses). */
function transient (err: unknown): boolean {
  if (!isWarrenError(err)) return true
  return ([ErrorCodes.CONNECTION_CLOSED, ErrorCodes.TIMEOUT, ErrorCodes.OVERLOADED, ErrorCodes.QUOTA, ErrorCodes.INTERNAL] as string[]).includes(err.code)
}

/** A push, tried again while the control plane may come back (not when it keeps no blob store). */
async function pushWithRetries (push: PushBlob, file: string): Promise<{ digest: string, bytes: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await push(file, 'record')
    } catch (err) {
      if (attempt >= RecordPushDefaults.attempts || !transient(err)) throw err
      await new Promise((resolve) => setTimeout(resolve, RecordPushDefaults.retryMs))
    }
  }
}
