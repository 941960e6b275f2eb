/**
 * The frame codec: msgpack through msgpackr, with the size limit applied to every frame.
 *
 * msgpackr packs into one scratch buffer shared by the whole process and returns a view of it;
 * the next pack anywhere may overwrite those bytes. `encodeShared` exposes that view for callers
 * that copy at once (the outbox copies into its batch); `encode` returns bytes the caller owns.
 */
import { Packr, RESET_BUFFER_MODE, Unpackr } from 'msgpackr'
import { createError, ErrorCodes, isWarrenError } from '../errors.js'
import type { Frame } from './frames.js'

/** What one WebSocket message decoded into: the values in order and each one's encoded size. */
export interface DecodedMessage {
  values: unknown[]
  sizes: number[]
}

export interface Codec {
  /** The largest frame, encoded, this codec produces or accepts. */
  readonly maxFrameBytes: number
  /**
   * Encodes a frame into the shared scratch buffer. The view is valid only until the next
   * encode in this process: copy it before doing anything else.
   * @throws WARREN_ERR_FRAME_TOO_LARGE over `maxFrameBytes`; WARREN_ERR_INVALID_ARGUMENT when a value cannot be encoded
   */
  encodeShared (frame: Frame): Uint8Array
  /**
   * Encodes a frame into a buffer the caller owns (safe to queue on a socket).
   * @throws as `encodeShared`
   */
  encode (frame: Frame): Buffer
  /**
   * Decodes one WebSocket message: one or more concatenated msgpack values. All or nothing: a
   * message with undecodable bytes anywhere yields no values, because nothing after the first
   * bad byte can be trusted to start where it seems to.
   * @throws WARREN_ERR_MALFORMED_FRAME when the bytes are not a sequence of msgpack values
   */
  decode (message: Uint8Array): DecodedMessage
}

/**
 * Creates a codec.
 * @param maxFrameBytes the size limit of one encoded frame
 */
export function createCodec (maxFrameBytes: number): Codec {
  // Plain maps, no msgpackr records: every frame stands alone (no structure table shared with
  // the peer), which is what lets a receiver drop any single message without losing its way.
  const packr = new Packr({ useRecords: false })
  const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true })

  function encodeShared (frame: Frame): Uint8Array {
    let bytes: Uint8Array
    try {
      // RESET_BUFFER_MODE rewinds the scratch position after this pack: the next one reuses the
      // same bytes, so no scratch memory is pinned by our frames. We copy before that happens.
      bytes = packr.pack(frame, RESET_BUFFER_MODE)
    } catch (err) {
      if (isWarrenError(err)) throw err
      throw createError(ErrorCodes.INVALID_ARGUMENT, `cannot encode ${frame.k} frame: ${(err as Error).message}`, { kind: frame.k })
    }
    if (bytes.length > maxFrameBytes) {
      throw createError(ErrorCodes.FRAME_TOO_LARGE, `${frame.k} frame of ${bytes.length} bytes exceeds the limit of ${maxFrameBytes}`, {
        kind: frame.k, size: bytes.length, limit: maxFrameBytes
      })
    }
    return bytes
  }

  return {
    maxFrameBytes,
    encodeShared,
    encode (frame) {
      const shared = encodeShared(frame)
      const owned = Buffer.allocUnsafe(shared.length)
      owned.set(shared)
      return owned
    },
    decode (message) {
      const values: unknown[] = []
      const sizes: number[] = []
      try {
        unpackr.unpackMultiple(message, (value: unknown, start?: number, end?: number) => {
          values.push(value)
          sizes.push((end ?? 0) - (start ?? 0))
        })
      } catch (err) {
        // RangeError from absurd nesting lands here too: the decoder recursed, we did not crash.
        throw createError(ErrorCodes.MALFORMED_FRAME, `undecodable message: ${(err as Error).message}`, { size: message.length })
      }
      return { values, sizes }
    }
  }
}
