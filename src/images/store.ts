/**
 * A node's local layer store: EROFS images in one directory, named by digest, and a resolver
 * from what a create names to an image file. A node trusts only two kinds of reference:
 *
 *   busybox                 the default base layer (static busybox), built on first use
 *   sha256:<hex>            a layer in the store, or pulled from the blob store (digest checked)
 *
 * Anything else is refused, whatever the control plane let through: a layer is never built from
 * a host directory or a Debian suite because a create asked (operators build layers with
 * `warren image build`). Pulls of the same layer run once, however many sandboxes ask at once.
 */
import { createHash } from 'node:crypto'
import { createWriteStream, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'
import { isDigest } from './blob/index.js'
import { fetchTrusting, tlsRefusal } from '../transport/tls.js'
import { buildBusyboxLayer } from './busybox.js'

/** Where layers named by digest come from when this node does not have them. */
export interface LayerSource {
  /** `http://host:port` of a blob store (the control plane serves one). */
  baseUrl: string
  /** Bearer token (the node join token). */
  token: string
  /** An `https://` store's CA (PEM), trusted beside the system's roots. */
  ca?: string
}


export const LayerStoreDefaults = {
  /**
   * The most bytes of whole files (layers, VM states) a store keeps: past it the least recently
   * used go (`sweep`), to be pulled again from the blob store if asked for. Every snapshot a
   * node cuts lands here, so without a bound a node's disk fills with them.
   */
  maxBytes: 32 * 1024 ** 3,
  /** A file used or made this recently is never swept (a push or a mount may be about to read it). */
  minAgeMs: 10 * 60_000
}

/** A whole file of the store: `<64 hex>.<suffix>`, never a temporary one. */
const WHOLE_FILE = /^[0-9a-f]{64}\.[a-z]+$/

export class LayerStore {
  private readonly building = new Map<string, Promise<string>>()
  /** The file each settled resolve gave: a file swept (here, or by a store sharing the directory) is resolved again. */
  private readonly resolved = new Map<string, string>()
  /** When this store last handed out each file (at most one entry per file in the directory). */
  private readonly usedAt = new Map<string, number>()

  constructor (
    readonly dir: string,
    private readonly source?: LayerSource,
    /** Present layers named by digest on demand (FUSE + chunk cache) instead of pulling them whole. */
    private readonly lazy?: { resolve (digest: string): Promise<string>, release (digest: string): Promise<void>, cached (): string[] }
  ) {
    mkdirSync(dir, { recursive: true })
  }

  /**
   * Digests of the layers and other blobs (`blobFile`'s) this store holds whole (`sha256:…`),
   * for placement's locality; files still arriving (`.part`) are not among them.
   */
  cached (): string[] {
    const whole = readdirSync(this.dir).filter((f) => WHOLE_FILE.test(f)).map((f) => `sha256:${f.slice(0, 64)}`)
    return [...new Set([...whole, ...(this.lazy?.cached() ?? [])])]
  }

  /**
   * A sandbox using `ref` ended. Layers presented on demand count their users (a layer with
   * none may be evicted); whole local files need nothing.
   */
  async release (ref: string): Promise<void> {
    if (this.onDemand(ref)) await this.lazy!.release(ref)
  }

  /** True when `ref` is presented on demand (through the layer server), not a whole local file. */
  onDemand (ref: string): boolean {
    return this.lazy !== undefined && isDigest(ref) && !existsSync(join(this.dir, `${ref.slice(7)}.erofs`))
  }

  /** The image file for a layer reference (`busybox` is built here on first use). */
  resolve (ref: string): Promise<string> {
    // Layers on demand count every user, so they are not memoised here.
    if (this.onDemand(ref)) return this.lazy!.resolve(ref)
    const done = this.resolved.get(ref)
    if (done !== undefined && !existsSync(done)) {
      this.resolved.delete(ref)
      this.building.delete(ref)
    }
    const known = this.building.get(ref)
    if (known !== undefined) return known.then((path) => this.touch(path))
    const work = this.build(ref)
    this.building.set(ref, work)
    // A failed build or pull is not remembered: the next create tries again.
    work.then((path) => this.resolved.set(ref, path), () => this.building.delete(ref))
    return work
  }

  /**
   * Removes the least recently used whole files past `maxBytes`, never one used or made in the
   * last `minAgeMs`. A sandbox running on a removed layer keeps reading it (its mount or QEMU
   * holds the file open); the next create that names it pulls it again.
   * @returns the files removed
   */
  sweep (maxBytes = LayerStoreDefaults.maxBytes, minAgeMs = LayerStoreDefaults.minAgeMs, now = Date.now()): string[] {
    const files = readdirSync(this.dir).filter((f) => WHOLE_FILE.test(f)).flatMap((f) => {
      try {
        const path = join(this.dir, f)
        const st = statSync(path)
        return [{ path, bytes: st.size, usedMs: Math.max(this.usedAt.get(path) ?? 0, st.mtimeMs) }]
      } catch { return [] } // removed meanwhile
    })
    // Marks of files gone another way (a store sharing the directory swept them) go too.
    const present = new Set(files.map((f) => f.path))
    for (const path of this.usedAt.keys()) if (!present.has(path)) this.usedAt.delete(path)
    let total = files.reduce((n, f) => n + f.bytes, 0)
    const removed: string[] = []
    for (const f of files.sort((a, b) => a.usedMs - b.usedMs)) {
      if (total <= maxBytes) break
      if (now - f.usedMs < minAgeMs) break // the rest are newer still
      rmSync(f.path, { force: true })
      this.usedAt.delete(f.path)
      total -= f.bytes
      removed.push(f.path)
    }
    return removed
  }

  /** A whole file was added (a pull, a snapshot cut here): the store is brought back under its bound. */
  added (): void {
    try { this.sweep() } catch { /* the directory is the node's: a failed sweep is tried at the next add */ }
  }

  /**
   * Marks a file used now, so `sweep` takes the least recently used first. Kept here, not in the
   * file: its mtime says which build of a layer it is (a VM template's key holds it), and setting
   * times back through a Date loses their nanoseconds.
   */
  private touch (path: string): string {
    this.usedAt.set(path, Date.now())
    return path
  }

  /**
   * A blob that is not a layer (a VM's saved state), as the file `<hex>.<suffix>` here: kept
   * whole (it is read whole), pulled from the blob store when absent, digest checked.
   * @throws WARREN_ERR_BAD_SPEC naming `field` for a malformed digest; NOT_FOUND when no one has it
   */
  blobFile (digest: string, suffix: string, field: string): Promise<string> {
    if (!isDigest(digest)) return Promise.reject(createError(ErrorCodes.BAD_SPEC, `bad blob digest ${String(digest).slice(0, 80)}`, { field }))
    const key = `${digest}.${suffix}`
    const known = this.building.get(key)
    if (known !== undefined) return known
    const work = (async () => {
      const path = join(this.dir, `${digest.slice(7)}.${suffix}`)
      if (existsSync(path)) return this.touch(path)
      if (this.source === undefined) throw createError(ErrorCodes.NOT_FOUND, `blob ${digest} is not on this node`, { field })
      await pullLayer(this.source, digest.slice(7), path)
      this.added()
      return path
    })()
    this.building.set(key, work)
    // Remembered only while it runs: the file is the memo, and it may be removed.
    void work.finally(() => this.building.delete(key)).catch(() => {})
    return work
  }

  private async build (ref: string): Promise<string> {
    if (ref === 'busybox') return await buildBusyboxLayer(this.dir)
    if (ref.startsWith('sha256:')) {
      const hex = ref.slice(7)
      if (!isDigest(ref)) throw createError(ErrorCodes.BAD_SPEC, `bad layer digest ${String(ref).slice(0, 80)}`, { field: 'image' })
      const path = join(this.dir, `${hex}.erofs`)
      if (existsSync(path)) return this.touch(path)
      if (this.source === undefined) throw createError(ErrorCodes.NOT_FOUND, `layer ${ref} is not on this node`)
      await pullLayer(this.source, hex, path)
      this.added()
      return path
    }
    throw createError(ErrorCodes.BAD_SPEC, `layer ${ref.slice(0, 80)} is not busybox or a digest (sha256:…); a node builds no other layer`, { field: 'image' })
  }
}

/**
 * Downloads a whole layer from the blob store, checking its digest as it streams; only a
 * verified file takes the final name. (The on-demand path fetches only the chunks read.)
 */
async function pullLayer (source: LayerSource, hex: string, path: string): Promise<void> {
  const url = `${source.baseUrl.replace(/\/+$/, '')}/blobs/sha256/${hex}`
  const res = await fetchTrusting(source.ca)(url, { headers: { authorization: `Bearer ${source.token}` } }).catch((err: unknown) => {
    throw tlsRefusal(err, url) ?? createError(ErrorCodes.BACKEND_UNAVAILABLE, `blob store unreachable at ${source.baseUrl}: ${(err as Error).message}`, { reason: 'fetch' })
  })
  if (res.status === 404) throw createError(ErrorCodes.NOT_FOUND, `layer sha256:${hex} is not in the blob store`)
  if (!res.ok || res.body === null) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `blob store answered ${res.status} for sha256:${hex}`, { reason: 'fetch' })
  const tmp = `${path}.${process.pid}.part`
  const hash = createHash('sha256')
  try {
    const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>)
    body.on('data', (chunk: Buffer) => hash.update(chunk))
    await pipeline(body, createWriteStream(tmp))
    if (hash.digest('hex') !== hex) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `layer sha256:${hex} arrived corrupted`, { reason: 'corrupt' })
    renameSync(tmp, path)
  } finally {
    rmSync(tmp, { force: true })
  }
}
