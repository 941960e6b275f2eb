/**
 * Reading tars in-process: a byte range of a file, decompressed once by its magic bytes, fed
 * to tar-stream's parser, each member handed to a callback in order. Nothing here spawns a
 * program or writes a file.
 */
import { closeSync, createReadStream, openSync, readSync } from 'node:fs'
import type { Readable } from 'node:stream'
import * as zlib from 'node:zlib'
import { extract, type Header } from 'tar-stream'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { archiveError, type ArchiveLimits } from './defaults.js'

export type Compression = 'none' | 'gzip' | 'zstd' | 'xz' | 'bzip2'

/** The compression of the bytes at `start` in `file`, by their magic number. */
export function sniff (file: string, start = 0): Compression {
  const head = Buffer.alloc(6)
  const fd = openSync(file, 'r')
  try { readSync(fd, head, 0, 6, start) } finally { closeSync(fd) }
  if (head[0] === 0x1f && head[1] === 0x8b) return 'gzip'
  if (head.readUInt32LE(0) === 0xfd2fb528) return 'zstd'
  if (head.equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz'
  if (head.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2'
  return 'none'
}

/** Node 22.15+ decompresses zstd; Node 20 does not. */
const zstdDecompress = (zlib as unknown as { createZstdDecompress?: () => NodeJS.ReadWriteStream }).createZstdDecompress

/**
 * The bytes `[start, start + size)` of `file`, decompressed. A format this Node cannot read is
 * refused with `what` (e.g. the layer's media type) in the message.
 */
export function openRange (file: string, range: { start: number, size?: number }, field: string, what: string): Readable {
  const compression = sniff(file, range.start)
  const unzip = compression === 'gzip'
    ? zlib.createGunzip()
    : compression === 'zstd' && zstdDecompress !== undefined ? zstdDecompress() : undefined
  if (compression !== 'none' && unzip === undefined) {
    throw archiveError(field, `${what} is ${compression}-compressed, which this Node ${process.version} cannot decompress` +
      (compression === 'zstd' ? ' (Node 22.15 and later can)' : '; gzip and uncompressed tars are read'), { compression }, ErrorCodes.UNSUPPORTED)
  }
  const raw = createReadStream(file, { start: range.start, ...(range.size !== undefined ? { end: range.start + range.size - 1 } : {}) })
  if (unzip === undefined) return raw
  raw.once('error', (err) => (unzip as unknown as Readable).destroy(err))
  return raw.pipe(unzip) as unknown as Readable
}

/** The body of a member: read as a stream of buffers (tar-stream's streamx Readable). */
export type MemberBody = AsyncIterable<Buffer> & { resume: () => unknown, on: (event: string, fn: (...args: unknown[]) => void) => unknown }

/** Reads and discards what is left of a member's body. */
export async function drain (body: MemberBody): Promise<void> {
  for await (const _chunk of body) { /* discarded */ }
}

/**
 * Calls `onMember` for each member of the tar on `input`, in order, one at a time; the
 * callback reads the body or drains it. At most `limits.maxMembers` members.
 * @param label what the tar is, for messages ("layer 2 of 5")
 */
export async function forEachMember (input: Readable, field: string, label: string, limits: ArchiveLimits,
  onMember: (header: Header & { byteOffset?: number }, body: MemberBody) => Promise<void>): Promise<void> {
  // latin1: member names reach the callback as their exact bytes (see paths.ts).
  const parser = extract({ filenameEncoding: 'latin1' } as Parameters<typeof extract>[0])
  input.once('error', (err) => parser.destroy(err))
  input.pipe(parser as unknown as NodeJS.WritableStream)
  let count = 0
  try {
    for await (const entry of parser) {
      if (++count > limits.maxMembers) throw archiveError(field, `${label} has more than ${limits.maxMembers} members`)
      const body = entry as unknown as MemberBody
      await onMember(entry.header, body)
      await drain(body)
    }
  } catch (err) {
    if (isWarrenError(err)) throw err
    // A failed system call (a full disk) is this host's trouble; anything else is the archive's.
    if ((err as NodeJS.ErrnoException).syscall !== undefined) throw createError(ErrorCodes.INTERNAL, `unpacking ${label} failed: ${(err as Error).message}`)
    throw archiveError(field, `${label} is not a readable tar: ${(err as Error).message}`)
  } finally {
    input.unpipe(parser as unknown as NodeJS.WritableStream)
    input.destroy()
  }
}
