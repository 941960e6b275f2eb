/**
 * One layer upload staged on the control plane's disk, until it is committed into the blob
 * store or abandoned:
 *
 *   <staging>/<tenant>/<hex>/manifest.json   the chunk manifest the client declared
 *   <staging>/<tenant>/<hex>/data            the layer's bytes so far (a sparse file of its size)
 *   <staging>/<tenant>/<hex>/present         one byte per chunk, 1 once the chunk is verified and durable
 *   <staging>/<tenant>/<hex>/kind            the layer's kind (base, workspace, tools)
 *
 * A chunk is checked against the manifest before it is written, and marked present only after
 * its bytes are fdatasync'd, so a crash can lose a mark but never claim bytes that are not
 * there. Nothing here is under the store's object keys: a staged upload is never served.
 */
import { createHash, randomUUID } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, open, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { chunkSpan, packChunkHashes, parseManifest, serializeManifest, type ChunkManifest } from '../blob/index.js'
import { BLOB_KINDS, type BlobKind } from '../names.js'

/** `[start, end)` runs of chunk indices. */
export type ChunkRuns = Array<[number, number]>

export class StagedUpload {
  private constructor (readonly dir: string, readonly manifest: ChunkManifest, readonly kind: BlobKind, private readonly hashes: Buffer, private readonly present: Uint8Array) {}

  /** The staged upload in `dir`, or undefined when there is none (or it is unreadable). */
  static async open (dir: string): Promise<StagedUpload | undefined> {
    try {
      const manifest = parseManifest(await readFile(join(dir, 'manifest.json'), 'utf8'))
      const kind = (await readFile(join(dir, 'kind'), 'utf8')) as BlobKind
      if (!BLOB_KINDS.includes(kind)) return undefined
      const present = new Uint8Array(manifest.chunks.length)
      present.set((await readFile(join(dir, 'present'))).subarray(0, present.length))
      return new StagedUpload(dir, manifest, kind, packChunkHashes(manifest), present)
    } catch {
      return undefined
    }
  }

  /**
   * Stages a new upload in `dir` (replacing whatever was there). The directory appears whole:
   * it is made under a temporary name and renamed into place.
   */
  static async create (dir: string, manifest: ChunkManifest, kind: BlobKind): Promise<StagedUpload> {
    const tmp = join(dirname(dir), `.new-${randomUUID()}`)
    await mkdir(tmp, { recursive: true, mode: 0o700 })
    try {
      await writeFile(join(tmp, 'manifest.json'), serializeManifest(manifest), { mode: 0o600 })
      await writeFile(join(tmp, 'kind'), kind, { mode: 0o600 })
      const data = await open(join(tmp, 'data'), 'wx', 0o600)
      try { await data.truncate(manifest.size) } finally { await data.close() }
      await writeFile(join(tmp, 'present'), new Uint8Array(manifest.chunks.length), { mode: 0o600 })
      await rm(dir, { recursive: true, force: true })
      await rename(tmp, dir)
    } catch (err) {
      await rm(tmp, { recursive: true, force: true })
      throw err
    }
    return new StagedUpload(dir, manifest, kind, packChunkHashes(manifest), new Uint8Array(manifest.chunks.length))
  }

  get dataPath (): string { return join(this.dir, 'data') }

  /** True when this upload is of exactly `manifest` as `kind` (a begin that resumes it). */
  sameAs (manifest: ChunkManifest, kind: BlobKind): boolean {
    return kind === this.kind && serializeManifest(manifest) === serializeManifest(this.manifest)
  }

  /** Chunks not yet received, as runs. */
  missing (): ChunkRuns {
    const runs: ChunkRuns = []
    let start = -1
    for (let i = 0; i <= this.present.length; i++) {
      const have = i === this.present.length || this.present[i] === 1
      if (!have && start < 0) start = i
      if (have && start >= 0) { runs.push([start, i]); start = -1 }
    }
    return runs
  }

  /** True once every chunk is present. */
  get complete (): boolean {
    return this.present.every((b) => b === 1)
  }

  /** Marks the upload as in use now (the sweeper goes by this time). */
  async touch (): Promise<void> {
    const now = new Date()
    await utimes(join(this.dir, 'present'), now, now)
  }

  /**
   * Takes the bytes of chunks `first…` (whole chunks; the last chunk of the layer may be short).
   * Every chunk is checked against the manifest before anything is written: a body with one
   * bad chunk changes nothing.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `offset` (not a chunk boundary, past the end),
   *   `body` (not whole chunks) or `chunk` (bytes whose sha256 is not the manifest's)
   */
  async write (offset: number, body: Uint8Array): Promise<void> {
    const m = this.manifest
    if (!Number.isSafeInteger(offset) || offset < 0 || offset % m.chunkBytes !== 0 || offset >= m.size) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `offset ${offset} is not the start of a chunk of this ${m.size}-byte layer (chunks of ${m.chunkBytes})`, { field: 'offset' })
    }
    const first = offset / m.chunkBytes
    let end = offset
    let index = first
    while (end < offset + body.length && index < m.chunks.length) end = chunkSpan(m, index++).end
    if (end !== offset + body.length || body.length === 0) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `a body of ${body.length} bytes at ${offset} is not a run of whole chunks (chunks of ${m.chunkBytes}, layer of ${m.size})`, { field: 'body' })
    }
    for (let i = first; i < index; i++) {
      const { start, end: stop } = chunkSpan(m, i)
      const got = createHash('sha256').update(body.subarray(start - offset, stop - offset)).digest()
      if (!got.equals(this.hashes.subarray(i * 32, i * 32 + 32))) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, `chunk ${i} does not match its sha256 in the manifest: refused, nothing was written`, { field: 'chunk', chunk: i, reason: 'digest-mismatch' })
      }
    }
    const data = await open(this.dataPath, 'r+')
    try {
      let done = 0
      while (done < body.length) done += (await data.write(body, done, body.length - done, offset + done)).bytesWritten
      await data.datasync()
    } finally {
      await data.close()
    }
    // Durable bytes first, then their marks.
    const marks = await open(join(this.dir, 'present'), 'r+')
    try {
      const ones = new Uint8Array(index - first).fill(1)
      await marks.write(ones, 0, ones.length, first)
    } finally {
      await marks.close()
    }
    this.present.fill(1, first, index)
  }

  /**
   * Hashes the staged bytes whole. The chunks were checked on arrival; this checks the layer
   * digest the manifest claims for them.
   */
  async digestOfData (): Promise<string> {
    const hash = createHash('sha256')
    for await (const piece of createReadStream(this.dataPath, { highWaterMark: 1024 * 1024 })) hash.update(piece as Buffer)
    return `sha256:${hash.digest('hex')}`
  }

  /** Removes the staged upload and its bytes. */
  async remove (): Promise<void> {
    await rm(this.dir, { recursive: true, force: true })
  }
}
