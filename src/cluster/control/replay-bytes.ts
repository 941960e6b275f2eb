/**
 * The recorded bytes a replayed step needs (a command's stdin, a file's content), taken from
 * where the trajectory kept them — inline, or from the blob store a range at a time — so a
 * replay holds one range in memory however large the bytes; and the running count, sha256 and
 * head of a replayed command's output.
 */
import { createHash, type Hash } from 'node:crypto'
import type { RecordedBytes } from '../trajectory/index.js'
import { ReplayDefaults, type StepTarget, type StreamOutcome } from './replay-types.js'

/** True when all of the bytes were kept (inline or in the blob store), so a step can be applied again. */
export function keptWhole (r: RecordedBytes): boolean {
  return r.data !== undefined || r.blob !== undefined
}

/**
 * The bytes, in pieces of at most `pieceBytes`, in order.
 * @throws when they were not kept whole (check `keptWhole` first)
 */
export async function * recordedPieces (r: RecordedBytes, blob: StepTarget['blob'], pieceBytes: number): AsyncGenerator<Uint8Array> {
  if (r.data !== undefined) {
    for (let at = 0; at < r.data.length; at += pieceBytes) yield r.data.subarray(at, at + pieceBytes)
    return
  }
  if (r.blob === undefined) throw new Error('the bytes were not kept whole')
  for (let at = 0; at < r.bytes;) {
    const piece = await blob(r.blob, at, Math.min(pieceBytes, r.bytes - at))
    if (piece.length === 0) throw new Error(`blob ${r.blob} ends at ${at} of ${r.bytes} bytes`)
    yield piece
    at += piece.length
  }
}

/** What a result shows of recorded bytes: their count, sha256 and first `headBytes` (from the blob store when they are there). */
export async function recordedOutcome (r: RecordedBytes | undefined, blob: StepTarget['blob']): Promise<StreamOutcome> {
  const max = ReplayDefaults.headBytes
  if (r === undefined) return { bytes: 0, sha256: EMPTY_SHA256, head: new Uint8Array(0) }
  let head = r.data ?? r.head
  if (head === undefined && r.blob !== undefined && r.bytes > 0) head = await blob(r.blob, 0, Math.min(max, r.bytes)).catch(() => new Uint8Array(0))
  return { bytes: r.bytes, sha256: r.sha256, head: (head ?? new Uint8Array(0)).subarray(0, max) }
}

/** The sha256 of no bytes: what an output that was never recorded stands for. */
export const EMPTY_SHA256 = createHash('sha256').digest('hex')

/** One output of a replayed command as it flows: counted and hashed, only its head kept. */
export class StreamTally {
  private readonly hash: Hash = createHash('sha256')
  private bytes = 0
  private readonly head: Uint8Array[] = []
  private headLength = 0

  /** Takes the next bytes. */
  add (chunk: Uint8Array): void {
    this.hash.update(chunk)
    this.bytes += chunk.length
    const room = ReplayDefaults.headBytes - this.headLength
    if (room > 0) {
      const piece = Buffer.from(chunk.subarray(0, room))
      this.head.push(piece)
      this.headLength += piece.length
    }
  }

  /** The count, sha256 and head of everything taken (once: the hash is final after). */
  outcome (): StreamOutcome {
    return { bytes: this.bytes, sha256: this.hash.digest('hex'), head: Buffer.concat(this.head, this.headLength) }
  }
}
