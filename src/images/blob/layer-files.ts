/**
 * One cached layer on the node's disk:
 *
 *   <layers>/<hex>/manifest.json   the manifest; written last, so a directory without it is
 *                                  an interrupted creation and is removed
 *   <layers>/<hex>/data            a sparse file of the layer's size; chunk i at i * chunkBytes
 *   <layers>/<hex>/bitmap          one byte per chunk: 1 = chunk i is in `data` and durable
 *
 * Ordering: a chunk is written, fdatasync'd, and only then is its bitmap byte set. A crash can
 * lose a bitmap byte (the chunk is fetched again) but never leave one claiming bytes that are not
 * on disk. One byte per chunk rather than one bit, so setting chunk i never rewrites a byte
 * another chunk shares: concurrent completions cannot undo each other's marks.
 */
import { randomUUID } from 'node:crypto'
import { mkdir, open, readFile, rename, rm, stat, truncate, utimes, writeFile, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { parseManifest, serializeManifest, type ChunkManifest } from './manifest.js'
import { createSyncBatcher, type SyncBatcher } from './sync.js'

/** What a layer directory holds, as read at start-up. */
export interface LayerState {
  manifest: ChunkManifest
  /** 1 per chunk present. */
  present: Uint8Array
  /** When the layer was last used (the bitmap's mtime; see `touchLayerDir`). */
  lastUsedMs: number
}

const MARK = Uint8Array.of(1)

/**
 * Reads a layer directory. Repairs what can be repaired (a data file of the wrong size or a
 * bitmap of the wrong length: both reset, the chunks are fetched again).
 * @returns undefined when the directory is not a complete layer (the caller removes it)
 */
export async function loadLayerDir (dir: string, expectedDigest: string): Promise<LayerState | undefined> {
  let manifest: ChunkManifest
  try {
    manifest = parseManifest(await readFile(join(dir, 'manifest.json'), 'utf8'), expectedDigest)
  } catch {
    return undefined
  }
  const count = manifest.chunks.length
  const dataSize = await stat(join(dir, 'data')).then((s) => s.size, () => -1)
  let bitmap = await readFile(join(dir, 'bitmap')).catch(() => undefined)
  if (dataSize !== manifest.size || bitmap === undefined || bitmap.length !== count) {
    await writeFile(join(dir, 'data'), '')
    await truncate(join(dir, 'data'), manifest.size)
    bitmap = Buffer.alloc(count)
    await writeFile(join(dir, 'bitmap'), bitmap)
  }
  const present = new Uint8Array(count)
  for (let i = 0; i < count; i++) present[i] = bitmap[i] === 0 ? 0 : 1
  const lastUsedMs = await stat(join(dir, 'bitmap')).then((s) => s.mtimeMs, () => 0)
  return { manifest, present, lastUsedMs }
}

/** Creates an empty layer directory (replacing any leftover): sparse data, zero bitmap, manifest last. */
export async function createLayerDir (dir: string, manifest: ChunkManifest): Promise<void> {
  await rm(dir, { recursive: true, force: true })
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'data'), '')
  await truncate(join(dir, 'data'), manifest.size)
  await writeFile(join(dir, 'bitmap'), Buffer.alloc(manifest.chunks.length))
  const tmp = join(dir, `manifest.json.${randomUUID()}.tmp`)
  await writeFile(tmp, serializeManifest(manifest))
  await rename(tmp, join(dir, 'manifest.json'))
}

/** Records "used now" on disk, so least-recently-used order survives a restart. Best effort. */
export async function touchLayerDir (dir: string): Promise<void> {
  const now = new Date()
  await utimes(join(dir, 'bitmap'), now, now).catch(() => undefined)
}

/** The open files of a layer. */
export interface LayerFiles {
  /** Reads exactly `length` bytes at `position` of the layer into `target[offset…]`. */
  readAt (position: number, target: Uint8Array, offset: number, length: number): Promise<void>
  /** Writes a chunk's bytes at `position` (not yet durable). */
  writeChunk (position: number, bytes: Uint8Array): Promise<void>
  /** Makes chunk `index`'s written bytes durable, then sets its bitmap byte. */
  markDurable (index: number): Promise<void>
  close (): Promise<void>
}

/** Opens a layer directory's data and bitmap files. */
export async function openLayerFiles (dir: string): Promise<LayerFiles> {
  const data = await open(join(dir, 'data'), 'r+')
  let bitmap: FileHandle
  try {
    bitmap = await open(join(dir, 'bitmap'), 'r+')
  } catch (err) {
    await data.close()
    throw err
  }
  const durable: SyncBatcher = createSyncBatcher(() => data.datasync())
  return {
    async readAt (position, target, offset, length) {
      let done = 0
      while (done < length) {
        const { bytesRead } = await data.read(target, offset + done, length - done, position + done)
        if (bytesRead === 0) throw new Error(`layer data ends at ${position + done}, expected ${position + length}`)
        done += bytesRead
      }
    },
    async writeChunk (position, bytes) {
      let done = 0
      while (done < bytes.length) done += (await data.write(bytes, done, bytes.length - done, position + done)).bytesWritten
    },
    async markDurable (index) {
      await durable.sync()
      // Not synced itself: a lost mark only costs a refetch.
      await bitmap.write(MARK, 0, 1, index)
    },
    async close () {
      await Promise.allSettled([data.close(), bitmap.close()])
    }
  }
}
