/**
 * The control plane's blob store on disk: the same layout as the object keys (digest.ts), so the
 * directory can be served as-is by the blob server, any static HTTP server, or synced to a bucket.
 *
 *   <root>/blobs/sha256/<hex>
 *   <root>/manifests/sha256/<hex>.json
 */
import { randomUUID } from 'node:crypto'
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { BlobDefaults } from './defaults.js'
import { blobKey, manifestKey } from './digest.js'
import { hashFileChunks, serializeManifest, type ChunkManifest } from './manifest.js'

export interface PushedLayer {
  digest: string
  size: number
  manifest: ChunkManifest
  /** Where the layer now lives in the store. */
  blobPath: string
  manifestPath: string
  /** True when the store already held this layer and this manifest: nothing changed. */
  existed: boolean
}

export interface PushOptions {
  /** Bytes per chunk of the manifest (default `BlobDefaults.chunkBytes`). */
  chunkBytes?: number
}

/** Where a layer and its manifest live under a store root. */
export function storePaths (root: string, digest: string): { blob: string, manifest: string } {
  return { blob: join(root, ...blobKey(digest).split('/')), manifest: join(root, ...manifestKey(digest).split('/')) }
}

/**
 * Copies a layer image into the store under its digest and writes its chunk manifest. One pass
 * over the source: the bytes hashed are the bytes written, so a file changing under the copy
 * cannot end up stored under a digest it does not have. Idempotent: pushing the same bytes again
 * leaves the store as it was.
 * @param root the store's root directory
 * @param path the layer image file
 */
export async function pushLayer (root: string, path: string, options: PushOptions = {}): Promise<PushedLayer> {
  const chunkBytes = options.chunkBytes ?? BlobDefaults.chunkBytes
  const blobDir = join(root, 'blobs', 'sha256')
  await mkdir(blobDir, { recursive: true })
  await mkdir(join(root, 'manifests', 'sha256'), { recursive: true })
  // The temporary name cannot match the server's key pattern, so it is never served half-written.
  const tmp = join(blobDir, `.push-${process.pid}-${randomUUID()}`)
  try {
    const out = await open(tmp, 'wx')
    let manifest: ChunkManifest
    try {
      manifest = await hashFileChunks(path, chunkBytes, async (bytes) => {
        let done = 0
        while (done < bytes.length) done += (await out.write(bytes, done, bytes.length - done)).bytesWritten
      })
      await out.sync()
    } finally {
      await out.close()
    }
    return await installLayer(root, tmp, manifest)
  } finally {
    await rm(tmp, { force: true })
  }
}

/**
 * Puts a verified layer file into the store under its digest, with its chunk manifest: the
 * file is renamed into place (so a reader sees the whole layer or none of it) unless the store
 * already holds those bytes, and the manifest is written by rename too. The caller must have
 * checked that `file`'s bytes are `manifest`'s; pushLayer hashes as it copies, an HTTP upload
 * hashes the staged file before calling this.
 * @param file a file on the store's file system (it is renamed, or left for the caller to remove)
 */
export async function installLayer (root: string, file: string, manifest: ChunkManifest): Promise<PushedLayer> {
  await mkdir(join(root, 'blobs', 'sha256'), { recursive: true })
  await mkdir(join(root, 'manifests', 'sha256'), { recursive: true })
  const paths = storePaths(root, manifest.digest)
  const existing = await stat(paths.blob).catch(() => undefined)
  // Same name, same bytes; a size mismatch means the stored copy was damaged, so replace it.
  const existed = existing !== undefined && existing.size === manifest.size
  if (!existed) await rename(file, paths.blob)
  const text = serializeManifest(manifest)
  const current = await readFile(paths.manifest, 'utf8').catch(() => undefined)
  if (current !== text) {
    const mtmp = `${paths.manifest}.${process.pid}-${randomUUID()}.tmp`
    try {
      await writeFile(mtmp, text, { flag: 'wx' })
      await rename(mtmp, paths.manifest)
    } finally {
      await rm(mtmp, { force: true })
    }
  }
  return { digest: manifest.digest, size: manifest.size, manifest, blobPath: paths.blob, manifestPath: paths.manifest, existed: existed && current === text }
}
