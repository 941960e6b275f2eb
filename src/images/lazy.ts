/**
 * Layers loaded on demand: the node's layer cache (chunks fetched over HTTP Range, verified,
 * kept in sparse files) presented through the FUSE layer file system, so a layer named by
 * digest is a file at once and EROFS mounts it; only the chunks a sandbox reads are fetched.
 *
 * A layer is presented (and its cache entry held open, so never evicted) while some sandbox
 * uses it: `resolve` counts a user, `release` uncounts one.
 */
import { mkdirSync } from 'node:fs'
import { rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createLayerCache, type CacheMetrics, type LayerCache, type LayerHandle } from './blob/index.js'
import { mountLayerFs, type LayerFileInfo, type LayerFs } from './fuse/index.js'
import type { LayerSource } from './store.js'

export interface LazyLayers {
  /** The path of a FUSE-presented file for the layer, ready to mount; counts one user. */
  resolve (digest: string): Promise<string>
  /** One user of the layer is done; with none left it is no longer presented (and may be evicted). */
  release (digest: string): Promise<void>
  /** Digests of the layers the cache holds (for placement's locality). */
  cached (): string[]
  metrics (): CacheMetrics
  /** Layers presented now (some sandbox uses each). */
  inUse (): number
  /**
   * Sets how many users each presented layer has, from what the node found running after a
   * restart of its agent: users that did not survive are dropped (a layer left with none may be
   * evicted). Layers not presented now are not presented by this.
   */
  sync (users: Record<string, number>): Promise<void>
  close (): Promise<void>
}

export interface LazyLayersOptions {
  source: LayerSource
  /** Holds the chunk cache. */
  cacheDir: string
  /** An empty directory to mount the layer files on. */
  mountpoint: string
  maxBytes?: number
  onError?: (err: Error) => void
}

export async function createLazyLayers (o: LazyLayersOptions): Promise<LazyLayers> {
  mkdirSync(o.cacheDir, { recursive: true })
  mkdirSync(o.mountpoint, { recursive: true })
  const cache: LayerCache = await createLayerCache({
    dir: o.cacheDir, baseUrl: o.source.baseUrl, token: o.source.token, autoPrefetch: true,
    ...(o.source.ca !== undefined ? { ca: o.source.ca } : {}),
    ...(o.maxBytes !== undefined ? { maxBytes: o.maxBytes } : {})
  })
  const files = new Map<string, { info: LayerFileInfo, handle: LayerHandle }>()
  const users = new Map<string, number>()
  const opening = new Map<string, Promise<string>>()
  let fs: LayerFs
  try {
    fs = await mountLayerFs({
      mountpoint: o.mountpoint,
      files: { get: (name) => files.get(name)?.info, list: () => [...files.values()].map((f) => f.info) },
      read: async (name, offset, length) => {
        const file = files.get(name)
        if (file === undefined) throw new Error(`no layer ${name}`)
        return await file.handle.read(offset, length)
      },
      ...(o.onError !== undefined ? { onError: o.onError } : {})
    })
  } catch (err) {
    await cache.close()
    throw err
  }
  /** No sandbox uses the layer any more: stop presenting it; its cache entry may be evicted. */
  async function unpresent (name: string): Promise<void> {
    users.delete(name)
    const file = files.get(name)
    files.delete(name)
    opening.delete(name)
    await file?.handle.close()
  }

  return {
    resolve (digest) {
      const name = `${digest.slice('sha256:'.length)}.erofs`
      users.set(name, (users.get(name) ?? 0) + 1)
      const known = opening.get(name)
      if (known !== undefined) return known
      const work = cache.open(digest).then((handle) => {
        files.set(name, { info: { name, size: handle.size }, handle })
        return join(fs.mountpoint, name)
      })
      opening.set(name, work)
      work.catch(() => { opening.delete(name); users.delete(name) })
      return work
    },
    async release (digest) {
      const name = `${digest.slice('sha256:'.length)}.erofs`
      const left = (users.get(name) ?? 0) - 1
      if (left > 0) { users.set(name, left); return }
      await unpresent(name)
    },
    async sync (counts) {
      for (const name of [...users.keys()]) {
        const n = counts[`sha256:${name.slice(0, -'.erofs'.length)}`] ?? 0
        if (n > 0) users.set(name, n)
        else await unpresent(name)
      }
    },
    cached: () => cache.layers().map((l) => l.digest),
    metrics: () => cache.metrics(),
    inUse: () => users.size,
    async close () {
      await fs.unmount()
      await rmdir(fs.mountpoint).catch(() => {})
      for (const f of files.values()) await f.handle.close()
      await cache.close()
    }
  }
}
