/**
 * The node side of on-demand layer loading. `open(digest)` gives a handle whose `read` serves
 * bytes of the layer, fetching missing chunks from the blob store; the FUSE file system presents
 * each handle as a file.
 *
 *   <dir>/layers/<hex>/   one directory per cached layer (layer-files.ts)
 *   <dir>/access/<hex>.json   the chunks the last cold start read (access-log.ts)
 *
 * Lifecycle: every handle and every prefetch holds a reference; a layer with references is never
 * evicted. When chunk bytes on disk exceed `maxBytes`, unreferenced layers go, least recently
 * used first. The first open of a layer since it came into the cache is a cold start: the chunks
 * it reads are recorded, and a recorded list from an earlier cold start is prefetched.
 *
 * One cache per directory: two processes sharing one would overwrite each other's files.
 */
import { EventEmitter, setMaxListeners } from 'node:events'
import { mkdir, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { WarrenError } from '../../errors.js'
import { accessLogPath, AccessRecorder, loadAccessLog, saveAccessLog } from './access-log.js'
import { BlobDefaults, checkInt, defined, type LayerCacheTunables } from './defaults.js'
import { digestHex } from './digest.js'
import { asBlobError, blobError } from './errors.js'
import { fetchManifest, withDeadline, type BlobSource } from './fetch.js'
import { CachedLayer, type LayerContext } from './layer.js'
import { createLayerDir, loadLayerDir, touchLayerDir } from './layer-files.js'
import { Handle } from './handle.js'
import { Limiter } from './limiter.js'
import { createCounters, snapshot, type CacheMetrics } from './metrics.js'
import type { LayerCache, LayerCacheEvents, LayerCacheOptions, LayerHandle, LayerInfo, PrefetchResult } from './types.js'

const HEX_NAME = /^[0-9a-f]{64}$/

class LayerCacheImpl extends EventEmitter<LayerCacheEvents> implements LayerCache {
  private readonly o: LayerCacheTunables
  private readonly source: BlobSource
  private readonly counters = createCounters()
  private readonly closing = new AbortController()
  private readonly entries = new Map<string, CachedLayer>()
  private readonly creating = new Map<string, Promise<void>>()
  private readonly background = new Set<Promise<unknown>>()
  private readonly ctx: LayerContext
  private readonly layersDir: string
  private cachedBytes = 0
  private lastStamp = 0
  private evictRun: Promise<void> | undefined
  private evictAgain = false
  private closed = false

  constructor (private readonly dir: string, options: LayerCacheOptions) {
    super()
    this.o = { ...BlobDefaults.cache, ...defined(options) }
    checkInt('maxBytes', this.o.maxBytes, 0)
    checkInt('fetchTimeoutMs', this.o.fetchTimeoutMs, 1)
    checkInt('fetchConcurrency', this.o.fetchConcurrency, 1)
    checkInt('prefetchConcurrency', this.o.prefetchConcurrency, 1)
    checkInt('recordWindowMs', this.o.recordWindowMs, 0)
    checkInt('recordMaxChunks', this.o.recordMaxChunks, 0)
    checkInt('maxManifestBytes', this.o.maxManifestBytes, 1)
    this.source = { baseUrl: options.baseUrl, token: options.token, headers: options.headers, ...(options.ca !== undefined ? { ca: options.ca } : {}) }
    this.layersDir = join(dir, 'layers')
    // Every fetch in flight listens for the close; there are legitimately more than ten.
    setMaxListeners(0, this.closing.signal)
    this.ctx = {
      source: this.source,
      limiter: new Limiter(this.o.fetchConcurrency),
      fetchTimeoutMs: this.o.fetchTimeoutMs,
      signal: this.closing.signal,
      counters: this.counters,
      fetchFailed: (digest, chunk, error) => this.emit('fetchFailed', { digest, chunk, error }),
      corruptChunk: (digest, chunk, attempt) => this.emit('corruptChunk', { digest, chunk, attempt }),
      persistFailed: (digest, chunk, error) => this.emit('persistFailed', { digest, chunk, error }),
      grew: (delta) => {
        this.cachedBytes += delta
        if (delta > 0) this.scheduleEviction()
      }
    }
  }

  /** Loads what an earlier run left on disk. */
  async init (): Promise<void> {
    await mkdir(this.layersDir, { recursive: true })
    await mkdir(join(this.dir, 'access'), { recursive: true })
    for (const name of await readdir(this.layersDir)) {
      const dir = join(this.layersDir, name)
      const state = HEX_NAME.test(name) ? await loadLayerDir(dir, `sha256:${name}`) : undefined
      if (state === undefined) {
        await rm(dir, { recursive: true, force: true })
        continue
      }
      const layer = new CachedLayer(name, dir, state.manifest, state.present, state.lastUsedMs, this.ctx)
      // Bytes on disk mean a start-up has run before: the next open is not cold.
      layer.everOpened = layer.presentBytes > 0
      this.entries.set(name, layer)
      this.cachedBytes += layer.presentBytes
    }
    this.scheduleEviction()
  }

  async open (digest: string): Promise<LayerHandle> {
    const layer = await this.acquire(digest, true)
    return new Handle(layer, () => this.release(layer))
  }

  async prefetch (digest: string): Promise<PrefetchResult> {
    const hex = digestHex(digest)
    const result: PrefetchResult = { digest, chunks: 0, fetched: 0, failed: 0 }
    const record = await loadAccessLog(accessLogPath(this.dir, hex))
    if (record !== undefined && record.digest === digest) {
      const layer = await this.acquire(digest, false)
      try {
        if (record.chunkBytes === layer.chunkBytes) {
          result.chunks = record.chunks.length
          Object.assign(result, await layer.prefetch(record.chunks, this.o.prefetchConcurrency))
        }
      } finally {
        await this.release(layer)
      }
    }
    this.emit('prefetched', result)
    return result
  }

  async evict (digest: string): Promise<boolean> {
    const layer = this.entries.get(digestHex(digest))
    if (layer === undefined) return true
    if (layer.refs > 0) return false
    await this.evictLayer(layer)
    return true
  }

  layers (): LayerInfo[] {
    return [...this.entries.values()].filter((l) => l.evicting === undefined).map((l) => ({
      digest: l.digest, size: l.size, cachedBytes: l.presentBytes, inUse: l.refs > 0, lastUsedMs: l.lastUsed
    }))
  }

  metrics (): CacheMetrics {
    return snapshot(this.counters, this.cachedBytes, this.entries.size)
  }

  async idle (): Promise<void> {
    for (;;) {
      const layers = [...this.entries.values()]
      if (this.background.size === 0 && !layers.some((l) => l.busy)) return
      await Promise.allSettled([...this.background, ...layers.map((l) => l.settle())])
    }
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.closing.abort()
    await Promise.all([...this.entries.values()].map((l) => this.finishRecording(l)))
    await this.idle()
    await Promise.all([...this.entries.values()].map((l) => l.closeFiles()))
  }

  /** Takes a reference on a layer, bringing it into the cache first when needed. */
  private async acquire (digest: string, user: boolean): Promise<CachedLayer> {
    const hex = digestHex(digest)
    for (;;) {
      if (this.closed) throw blobError('closed', 'the layer cache is closed', { digest })
      const layer = this.entries.get(hex)
      if (layer === undefined) {
        await this.create(hex, digest)
        continue
      }
      if (layer.evicting !== undefined) {
        await layer.evicting
        continue
      }
      // From here to the end of the loop body nothing awaits before refs > 0: no eviction can slip in.
      layer.refs++
      layer.lastUsed = this.stamp()
      const cold = user && !layer.everOpened
      if (user) layer.everOpened = true
      try {
        await layer.opened()
      } catch (err) {
        if (cold) layer.everOpened = false // the cold start did not happen; the next open is one
        await this.release(layer)
        throw asBlobError(err, { digest })
      }
      if (cold) this.coldStart(layer)
      return layer
    }
  }

  private async release (layer: CachedLayer): Promise<void> {
    layer.refs--
    layer.lastUsed = this.stamp()
    if (layer.refs > 0) return
    await this.finishRecording(layer)
    await layer.settle()
    await touchLayerDir(layer.dir)
    if (layer.refs === 0) await layer.closeFiles()
    this.scheduleEviction()
  }

  /** Brings a layer into the cache (manifest fetched, empty files); one creation per layer at a time. */
  private create (hex: string, digest: string): Promise<void> {
    let p = this.creating.get(hex)
    if (p === undefined) {
      p = this.doCreate(hex, digest).finally(() => this.creating.delete(hex))
      this.creating.set(hex, p)
    }
    return p
  }

  private async doCreate (hex: string, digest: string): Promise<void> {
    let manifest
    try {
      manifest = await withDeadline(this.o.fetchTimeoutMs, this.closing.signal, { digest },
        (signal) => fetchManifest(this.source, digest, signal, this.o.maxManifestBytes))
    } catch (err) {
      const e = err as WarrenError
      if (e.details?.reason !== 'closed') {
        this.counters.fetchFailures++
        this.emit('fetchFailed', { digest, chunk: undefined, error: e })
      }
      throw err
    }
    const dir = join(this.layersDir, hex)
    try {
      await createLayerDir(dir, manifest)
    } catch (err) {
      throw asBlobError(err, { digest })
    }
    this.entries.set(hex, new CachedLayer(hex, dir, manifest, new Uint8Array(manifest.chunks.length), this.stamp(), this.ctx))
  }

  /** A first open: record what it reads, and give it a head start from the last record. */
  private coldStart (layer: CachedLayer): void {
    if (this.o.recordMaxChunks > 0) {
      layer.recorder = new AccessRecorder(this.o.recordMaxChunks)
      layer.recordTimer = setTimeout(() => this.track(this.finishRecording(layer)), this.o.recordWindowMs)
      layer.recordTimer.unref()
    }
    if (this.o.autoPrefetch) this.track(this.prefetch(layer.digest).catch(() => undefined))
  }

  /** Ends a layer's recording and writes its record (a record with no chunks is not written). */
  private async finishRecording (layer: CachedLayer): Promise<void> {
    const recorder = layer.recorder
    if (recorder === undefined) return
    layer.recorder = undefined
    clearTimeout(layer.recordTimer)
    const chunks = recorder.chunks()
    if (chunks.length === 0) return
    await saveAccessLog(accessLogPath(this.dir, layer.hex), { digest: layer.digest, chunkBytes: layer.chunkBytes, chunks }).catch(() => undefined)
  }

  private scheduleEviction (): void {
    // A closed cache leaves the disk as it is; the next run evicts at start-up if need be.
    if (this.closed || this.cachedBytes <= this.o.maxBytes) return
    if (this.evictRun !== undefined) {
      this.evictAgain = true
      return
    }
    const run = (async () => {
      do {
        this.evictAgain = false
        while (this.cachedBytes > this.o.maxBytes) {
          const victim = this.leastRecentlyUsed()
          if (victim === undefined) break // everything left is in use
          await this.evictLayer(victim)
        }
      } while (this.evictAgain)
    })()
    this.evictRun = run
    const done = (): void => { if (this.evictRun === run) this.evictRun = undefined }
    run.then(done, done)
    this.track(run)
  }

  private leastRecentlyUsed (): CachedLayer | undefined {
    let best: CachedLayer | undefined
    for (const l of this.entries.values()) {
      if (l.refs > 0 || l.evicting !== undefined || l.presentBytes === 0) continue
      if (best === undefined || l.lastUsed < best.lastUsed) best = l
    }
    return best
  }

  /** Removes an unreferenced layer; openers arriving meanwhile wait and then start afresh. */
  private evictLayer (layer: CachedLayer): Promise<void> {
    if (layer.evicting !== undefined) return layer.evicting
    layer.evicting = (async () => {
      await layer.settle()
      await layer.closeFiles()
      await rm(layer.dir, { recursive: true, force: true }).catch(() => undefined)
      if (this.entries.get(layer.hex) === layer) this.entries.delete(layer.hex)
      this.cachedBytes -= layer.presentBytes
      this.counters.evictions++
      this.emit('evicted', { digest: layer.digest, bytes: layer.presentBytes })
    })()
    return layer.evicting
  }

  /**
   * A use time: wall-clock milliseconds (comparable with the file times a restart seeds from),
   * but strictly increasing, so two uses in one millisecond still have an order.
   */
  private stamp (): number {
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1)
    return this.lastStamp
  }

  /** Background work `idle` and `close` wait for. */
  private track (p: Promise<unknown>): void {
    this.background.add(p)
    const done = (): void => { this.background.delete(p) }
    p.then(done, done)
  }
}

/**
 * Creates a node's layer cache over `options.dir`, picking up what an earlier run left there
 * (chunks whose bitmap bytes are set are not fetched again).
 * @example
 *   const cache = await createLayerCache({ dir: '/var/lib/warren/layers', baseUrl, token: joinToken })
 *   const h = await cache.open('sha256:…'); const bytes = await h.read(0, 4096); await h.close()
 */
export async function createLayerCache (options: LayerCacheOptions): Promise<LayerCache> {
  const cache = new LayerCacheImpl(options.dir, options)
  await cache.init()
  return cache
}
