/**
 * Chunk manifests: a layer file cut into fixed-size chunks, each named by its sha256, so a node
 * that fetches any chunk alone can check it. The manifest is a pure function of the file bytes
 * and the chunk size, and serializes with a fixed key order, so it is deterministic too.
 */
import { createHash } from 'node:crypto'
import { open } from 'node:fs/promises'
import { createError, ErrorCodes } from '../../errors.js'
import { BlobDefaults, checkChunkBytes } from './defaults.js'
import { isDigest } from './digest.js'

export interface ChunkManifest {
  /** `sha256:<hex>` of the whole layer file. */
  digest: string
  /** Layer bytes. */
  size: number
  /** Bytes per chunk; the last chunk may be shorter. */
  chunkBytes: number
  /** `sha256:<hex>` of each chunk, in file order. */
  chunks: string[]
}

/** Chunks in a file of `size` bytes. */
export function chunkCount (size: number, chunkBytes: number): number {
  return Math.ceil(size / chunkBytes)
}

/** The byte range `[start, end)` of chunk `index`. */
export function chunkSpan (m: Pick<ChunkManifest, 'size' | 'chunkBytes'>, index: number): { start: number, end: number } {
  const start = index * m.chunkBytes
  return { start, end: Math.min(m.size, start + m.chunkBytes) }
}

/**
 * Reads a file once, chunk by chunk, hashing the whole and each chunk; `sink` sees every chunk's
 * bytes in order (pushLayer copies with it, so the bytes stored are the bytes hashed).
 * @param sink awaited before the next chunk is read; its buffer is reused afterwards
 */
export async function hashFileChunks (path: string, chunkBytes: number, sink?: (bytes: Uint8Array) => Promise<void>): Promise<ChunkManifest> {
  checkChunkBytes(chunkBytes)
  const fh = await open(path, 'r')
  try {
    const whole = createHash('sha256')
    const chunks: string[] = []
    const buf = Buffer.allocUnsafe(chunkBytes)
    let size = 0
    for (;;) {
      // A read may return less than asked before the end of the file; fill the chunk first.
      let filled = 0
      while (filled < chunkBytes) {
        const { bytesRead } = await fh.read(buf, filled, chunkBytes - filled, size + filled)
        if (bytesRead === 0) break
        filled += bytesRead
      }
      if (filled === 0) break
      const bytes = buf.subarray(0, filled)
      whole.update(bytes)
      chunks.push(`sha256:${createHash('sha256').update(bytes).digest('hex')}`)
      if (sink !== undefined) await sink(bytes)
      size += filled
      if (filled < chunkBytes) break
    }
    return { digest: `sha256:${whole.digest('hex')}`, size, chunkBytes, chunks }
  } finally {
    await fh.close()
  }
}

/**
 * The chunk manifest of a layer image file.
 * @param chunkBytes bytes per chunk (default `BlobDefaults.chunkBytes`); a multiple of 4 KiB
 * @returns the same manifest for the same bytes and chunk size
 */
export function createManifest (path: string, chunkBytes: number = BlobDefaults.chunkBytes): Promise<ChunkManifest> {
  return hashFileChunks(path, chunkBytes)
}

/** The manifest as stored and served: fixed key order, one line, trailing newline. */
export function serializeManifest (m: ChunkManifest): string {
  return JSON.stringify({ digest: m.digest, size: m.size, chunkBytes: m.chunkBytes, chunks: m.chunks }) + '\n'
}

/**
 * Parses and checks a manifest: shape, chunk size, chunk count against size, digest syntax.
 * @param expectedDigest when given, the manifest must describe this layer
 * @throws WARREN_ERR_INVALID_ARGUMENT describing the first problem
 */
export function parseManifest (text: string, expectedDigest?: string): ChunkManifest {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    throw bad('not JSON')
  }
  if (raw === null || typeof raw !== 'object') throw bad('not an object')
  const o = raw as Record<string, unknown>
  if (!isDigest(o.digest)) throw bad('digest is not sha256:<hex>')
  if (expectedDigest !== undefined && o.digest !== expectedDigest) throw bad(`describes ${o.digest}, not ${expectedDigest}`)
  if (typeof o.size !== 'number' || !Number.isSafeInteger(o.size) || o.size < 0) throw bad('size is not a byte count')
  if (typeof o.chunkBytes !== 'number') throw bad('chunkBytes is not a number')
  try {
    checkChunkBytes(o.chunkBytes)
  } catch (err) {
    throw bad((err as Error).message)
  }
  if (!Array.isArray(o.chunks) || !o.chunks.every(isDigest)) throw bad('chunks is not a list of digests')
  if (o.chunks.length !== chunkCount(o.size, o.chunkBytes)) throw bad(`${o.chunks.length} chunks for ${o.size} bytes in chunks of ${o.chunkBytes}`)
  return { digest: o.digest, size: o.size, chunkBytes: o.chunkBytes, chunks: o.chunks as string[] }
}

function bad (why: string): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, `bad chunk manifest: ${why}`, { field: 'manifest' })
}

/** The chunk digests as one buffer of 32-byte hashes: a tenth of the memory of the strings. */
export function packChunkHashes (m: ChunkManifest): Buffer {
  const out = Buffer.allocUnsafe(m.chunks.length * 32)
  m.chunks.forEach((d, i) => out.write(d.slice(7), i * 32, 32, 'hex'))
  return out
}
