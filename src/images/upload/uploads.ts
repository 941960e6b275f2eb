/**
 * The uploads in progress: begin (or resume), take chunks, commit into the blob store, abort,
 * and sweep abandoned ones. Every bound of UploadTunables is enforced here; the HTTP handler
 * only parses requests and authenticates. Disk is the truth (a restarted control plane resumes
 * the uploads it finds); memory only holds locks and the open uploads' chunk hashes.
 */
import { mkdir, readdir, rm, stat, statfs } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { installLayer, storePaths, type ChunkManifest } from '../blob/index.js'
import type { BlobKind } from '../names.js'
import { uploadTunables, type UploadTunables } from './defaults.js'
import { StagedUpload, type ChunkRuns } from './staging.js'

/** What a begin answers: the layer is in the store already, or which chunks it still needs. */
export type UploadStatus =
  | { state: 'stored', digest: string, size: number }
  | { state: 'open', digest: string, size: number, chunkBytes: number, maxRequestBytes: number, missing: ChunkRuns }

export interface UploadsOptions {
  /** The blob store's root (the layout of src/images/blob/push.ts). */
  root: string
  /** Where uploads are staged: on the same file system as `root`, so a commit is a rename. */
  stagingDir: string
  /**
   * Records (or checks) a layer's kind once its bytes are in the store or found there.
   * @throws a WarrenError when the store knows the layer as another kind
   */
  recordLayer: (digest: string, kind: BlobKind) => Promise<void>
  tunables?: Partial<UploadTunables>
}

// A tenant's name, or `_nodes`: the uploader nodes push as (no tenant's name starts with `_`).
const TENANT = /^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,62}|_nodes)$/

export class Uploads {
  readonly tunables: UploadTunables
  private readonly open = new Map<string, StagedUpload>()
  private readonly busy = new Set<string>()
  /** Begins run one at a time, so two cannot both take a tenant's last upload slot. */
  private begins: Promise<unknown> = Promise.resolve()
  private readonly sweeper: NodeJS.Timeout

  constructor (private readonly o: UploadsOptions) {
    this.tunables = uploadTunables(o.tunables)
    this.sweeper = setInterval(() => { void this.sweep() }, this.tunables.sweepIntervalMs)
    this.sweeper.unref()
    void this.sweep()
  }

  /**
   * Starts an upload of `manifest`'s layer as `kind`, or resumes the tenant's upload of it.
   * @throws INVALID_ARGUMENT naming `size` (over maxLayerBytes) or `chunkBytes`; QUOTA
   *   (`quota: 'uploads'`) when the tenant has its maximum open; OVERLOADED when the cluster has
   */
  async begin (tenant: string, manifest: ChunkManifest, kind: BlobKind): Promise<UploadStatus> {
    const t = this.tunables
    if (manifest.size > t.maxLayerBytes) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `a layer of ${manifest.size} bytes is over this cluster's maximum of ${t.maxLayerBytes}`, { field: 'size', reason: 'too-large', max: t.maxLayerBytes })
    }
    if (manifest.chunkBytes > t.maxRequestBytes) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `chunks of ${manifest.chunkBytes} bytes are over the ${t.maxRequestBytes} a request may carry`, { field: 'chunkBytes' })
    }
    const run = this.begins.then(() => this.beginNow(tenant, manifest, kind))
    this.begins = run.catch(() => undefined)
    return await run
  }

  private async beginNow (tenant: string, manifest: ChunkManifest, kind: BlobKind): Promise<UploadStatus> {
    const { digest, size } = manifest
    if (await this.stored(manifest)) {
      await this.o.recordLayer(digest, kind)
      return { state: 'stored', digest, size }
    }
    return await this.locked(tenant, digest, async (key, dir) => {
      let staged = this.open.get(key) ?? await StagedUpload.open(dir)
      if (staged === undefined || !staged.sameAs(manifest, kind)) {
        if (staged === undefined) await this.checkRoom(tenant, manifest.size)
        staged = await StagedUpload.create(dir, manifest, kind)
      }
      this.open.set(key, staged)
      await staged.touch()
      return { state: 'open', digest, size, chunkBytes: manifest.chunkBytes, maxRequestBytes: this.tunables.maxRequestBytes, missing: staged.missing() }
    })
  }

  /**
   * Takes a run of whole chunks at `offset` (see StagedUpload.write).
   * @returns chunks still missing
   */
  async write (tenant: string, digest: string, offset: number, body: Uint8Array): Promise<{ missing: number }> {
    return await this.locked(tenant, digest, async (key, dir) => {
      const staged = await this.staged(key, dir, digest)
      await staged.write(offset, body)
      return { missing: staged.missing().reduce((n, [a, b]) => n + b - a, 0) }
    })
  }

  /**
   * Checks the whole layer against its digest and puts it in the store with its manifest.
   * A layer whose bytes are not its digest's is refused and its staged bytes removed.
   * @throws INVALID_ARGUMENT naming `chunks` (some missing) or `digest` (bytes are not the digest's)
   */
  async commit (tenant: string, digest: string): Promise<UploadStatus> {
    return await this.locked(tenant, digest, async (key, dir) => {
      const staged = await this.staged(key, dir, digest)
      const missing = staged.missing()
      if (missing.length > 0) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, `the upload of ${digest} still lacks ${missing.reduce((n, [a, b]) => n + b - a, 0)} chunks`, { field: 'chunks', missing: missing.slice(0, 64) })
      }
      const actual = await staged.digestOfData()
      if (actual !== digest) {
        this.open.delete(key)
        await staged.remove()
        throw createError(ErrorCodes.INVALID_ARGUMENT, `the uploaded bytes are ${actual}, not ${digest}: refused, nothing was stored`, { field: 'digest', reason: 'digest-mismatch' })
      }
      await this.o.recordLayer(digest, staged.kind)
      await installLayer(this.o.root, staged.dataPath, staged.manifest)
      this.open.delete(key)
      await staged.remove()
      return { state: 'stored', digest, size: staged.manifest.size }
    })
  }

  /** Drops an upload and its staged bytes. @returns whether there was one */
  async abort (tenant: string, digest: string): Promise<boolean> {
    return await this.locked(tenant, digest, async (key, dir) => {
      const staged = this.open.get(key) ?? await StagedUpload.open(dir)
      this.open.delete(key)
      await rm(dir, { recursive: true, force: true })
      return staged !== undefined
    })
  }

  /** Stops the sweeper. */
  close (): void {
    clearInterval(this.sweeper)
  }

  /**
   * Removes uploads nobody wrote to within idleTimeoutMs (and leftovers of interrupted
   * begins), freeing their tenants' slots and their disk.
   */
  async sweep (now = Date.now()): Promise<number> {
    let removed = 0
    for (const tenant of await readdir(this.o.stagingDir).catch(() => [] as string[])) {
      for (const name of await readdir(join(this.o.stagingDir, tenant)).catch(() => [] as string[])) {
        const key = `${tenant}/${name}`
        const dir = join(this.o.stagingDir, tenant, name)
        if (this.busy.has(key)) continue
        const mark = name.startsWith('.new-') ? dir : join(dir, 'present')
        const st = await stat(mark).catch(() => undefined)
        if (st !== undefined && now - st.mtimeMs < this.tunables.idleTimeoutMs) continue
        this.open.delete(key)
        await rm(dir, { recursive: true, force: true })
        removed++
      }
    }
    return removed
  }

  /** True when the store holds the layer and a manifest for it. */
  private async stored (manifest: ChunkManifest): Promise<boolean> {
    const paths = storePaths(this.o.root, manifest.digest)
    const [blob, man] = await Promise.all([stat(paths.blob).catch(() => undefined), stat(paths.manifest).catch(() => undefined)])
    return blob?.isFile() === true && blob.size === manifest.size && man?.isFile() === true
  }

  private async checkRoom (tenant: string, size: number): Promise<void> {
    const t = this.tunables
    await mkdir(this.o.stagingDir, { recursive: true, mode: 0o700 })
    // Sparse staging files take their room as chunks come: refuse a layer that could never fit.
    const fs = await statfs(this.o.stagingDir)
    if (size > fs.bavail * fs.bsize) {
      throw createError(ErrorCodes.NO_CAPACITY, `the blob store's disk has ${fs.bavail * fs.bsize} bytes free, too few for a layer of ${size}`, { field: 'size' })
    }
    const mine = (await readdir(join(this.o.stagingDir, tenant)).catch(() => [] as string[])).filter((n) => !n.startsWith('.'))
    if (mine.length >= t.maxUploadsPerTenant) {
      throw createError(ErrorCodes.QUOTA, `tenant ${tenant} may have ${t.maxUploadsPerTenant} uploads open at once; commit or abort one first`, { quota: 'uploads', limit: t.maxUploadsPerTenant })
    }
    let all = 0
    for (const other of await readdir(this.o.stagingDir).catch(() => [] as string[])) {
      all += (await readdir(join(this.o.stagingDir, other)).catch(() => [] as string[])).filter((n) => !n.startsWith('.')).length
    }
    if (all >= t.maxUploads) {
      throw createError(ErrorCodes.OVERLOADED, `the blob store has ${t.maxUploads} uploads open; try again later`, { retryAfterMs: 5000 })
    }
  }

  private async staged (key: string, dir: string, digest: string): Promise<StagedUpload> {
    const staged = this.open.get(key) ?? await StagedUpload.open(dir)
    if (staged === undefined) throw createError(ErrorCodes.NOT_FOUND, `no upload of ${digest} is open: begin it first`, { field: 'digest' })
    this.open.set(key, staged)
    return staged
  }

  /** Runs `fn` holding the upload's lock; a second request for the same upload meanwhile is OVERLOADED. */
  private async locked<T> (tenant: string, digest: string, fn: (key: string, dir: string) => Promise<T>): Promise<T> {
    if (!TENANT.test(tenant)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'bad tenant name', { field: 'tenant' })
    const key = `${tenant}/${digest.slice('sha256:'.length)}`
    if (this.busy.has(key)) throw createError(ErrorCodes.OVERLOADED, `another request is writing the upload of ${digest}; send one at a time`, { retryAfterMs: 200 })
    this.busy.add(key)
    try {
      return await fn(key, join(this.o.stagingDir, tenant, digest.slice('sha256:'.length)))
    } finally {
      this.busy.delete(key)
    }
  }
}
