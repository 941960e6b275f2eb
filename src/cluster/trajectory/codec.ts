/**
 * How trajectory records are written: msgpack (plain maps, as on the wire), and in a node's log
 * file each one behind its length (4 bytes, big-endian), so the file reads back record by record
 * and a record torn by a crash mid-write is recognised (and cut off) at the end.
 */
import { Packr, RESET_BUFFER_MODE, Unpackr } from 'msgpackr'
import type { LogRecord } from './types.js'

const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true })

/** Bytes of the length before each record in a log file. */
export const LENGTH_BYTES = 4

/** Encodes a value into bytes the caller owns. */
export function encodeValue (value: unknown): Buffer {
  return Buffer.from(packr.pack(value, RESET_BUFFER_MODE))
}

/** Decodes what `encodeValue` made. */
export function decodeValue<T> (bytes: Uint8Array): T {
  return unpackr.unpack(bytes) as T
}

/** A record as its log file holds it: length, then msgpack. */
export function frameRecord (record: LogRecord): { framed: Buffer, body: Buffer } {
  return frameValue(record)
}

/** Any value framed as a log's records are (output journals use it too). */
export function frameValue (value: unknown): { framed: Buffer, body: Buffer } {
  const body = encodeValue(value)
  const framed = Buffer.allocUnsafe(LENGTH_BYTES + body.length)
  framed.writeUInt32BE(body.length, 0)
  body.copy(framed, LENGTH_BYTES)
  return { framed, body }
}

/**
 * Splits bytes of a log file into record bodies (views into `bytes`).
 * @returns the bodies and where the last whole record ends; bytes after it are a record not whole (yet)
 */
export function splitRecords (bytes: Buffer, maxRecords = Infinity): { bodies: Buffer[], end: number } {
  const bodies: Buffer[] = []
  let at = 0
  while (bodies.length < maxRecords && at + LENGTH_BYTES <= bytes.length) {
    const length = bytes.readUInt32BE(at)
    if (at + LENGTH_BYTES + length > bytes.length) break
    bodies.push(bytes.subarray(at + LENGTH_BYTES, at + LENGTH_BYTES + length))
    at += LENGTH_BYTES + length
  }
  return { bodies, end: at }
}
