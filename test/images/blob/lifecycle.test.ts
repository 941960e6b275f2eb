import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createLayerCache, digestHex, type LayerCache, type LayerCacheOptions, type PrefetchResult, type PushedLayer } from '../../../src/images/blob/index.js'
import { timed, type Cleanup } from '../../support/index.js'
import { pushBytes, seededBytes, startStore, tempDir, TOKEN, type StoreFixture } from './helpers.js'

const CHUNK = 16 * 1024

async function openCache (defer: Cleanup['defer'], dir: string, store: StoreFixture, options: Partial<LayerCacheOptions> = {}): Promise<LayerCache> {
  const cache = await createLayerCache({ dir, baseUrl: store.url, token: TOKEN, autoPrefetch: false, ...options })
  defer(() => cache.close())
  return cache
}

/** Opens a layer, reads all of it, checks it, and closes it unless asked to keep it open. */
async function readAll (cache: LayerCache, layer: PushedLayer, bytes: Buffer, keepOpen = false) {
  const h = await cache.open(layer.digest)
  const got = await h.read(0, layer.size)
  assert.ok(Buffer.from(got).equals(bytes), `content of ${layer.digest}`)
  if (!keepOpen) await h.close()
  return h
}

test('eviction: least recently used unused layers go first; open layers are never evicted', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const names = ['a', 'b', 'c', 'd', 'e'] as const
  const bytes = Object.fromEntries(names.map((n, i) => [n, seededBytes(4 * CHUNK, 100 + i)])) as Record<typeof names[number], Buffer>
  const layers = {} as Record<typeof names[number], PushedLayer>
  for (const n of names) layers[n] = await pushBytes(dir, root, `${n}.img`, bytes[n], CHUNK)
  const store = await startStore(defer, root)
  const cacheDir = join(dir, 'cache')
  // Room for two layers of four chunks, not three.
  const cache = await openCache(defer, cacheDir, store, { maxBytes: 9 * CHUNK })
  const evicted: string[] = []
  cache.on('evicted', (e) => evicted.push(e.digest))
  const onDisk = (n: typeof names[number]): boolean => existsSync(join(cacheDir, 'layers', digestHex(layers[n].digest)))

  await readAll(cache, layers.a, bytes.a)
  await readAll(cache, layers.b, bytes.b)
  await readAll(cache, layers.a, bytes.a) // a is now more recent than b
  const c = await readAll(cache, layers.c, bytes.c, true)
  await cache.idle()
  assert.equal(evicted, [layers.b.digest])
  assert.ok(onDisk('a') && !onDisk('b') && onDisk('c'))
  assert.is(cache.metrics().cachedBytes, 8 * CHUNK)

  // With c and d open, only a can go.
  const d = await readAll(cache, layers.d, bytes.d, true)
  await cache.idle()
  assert.equal(evicted, [layers.b.digest, layers.a.digest])
  // c, d and e all open: over the limit, and nothing is evicted.
  const e = await readAll(cache, layers.e, bytes.e, true)
  await cache.idle()
  assert.is(evicted.length, 2)
  assert.is(cache.metrics().cachedBytes, 12 * CHUNK)
  assert.ok(onDisk('c') && onDisk('d') && onDisk('e'))
  assert.equal(cache.layers().map((l) => l.inUse), [true, true, true])
  // Their reads are still served from disk.
  const before = store.requests.length
  assert.ok(Buffer.from(await c.read(0, 4 * CHUNK)).equals(bytes.c))
  assert.is(store.requests.length, before)
  // Closing e makes it the only candidate.
  await e.close()
  await cache.idle()
  assert.equal(evicted, [layers.b.digest, layers.a.digest, layers.e.digest])
  assert.is(cache.metrics().evictions, 3)
  assert.is(cache.metrics().cachedBytes, 8 * CHUNK)
  // An evicted layer comes back on demand.
  await readAll(cache, layers.b, bytes.b)
  await c.close()
  await d.close()
  // evict() refuses a layer in use.
  const inUse = await cache.open(layers.b.digest)
  assert.is(await cache.evict(layers.b.digest), false)
  await inUse.close()
  assert.is(await cache.evict(layers.b.digest), true)
  assert.not.ok(onDisk('b'))
}))

test('the chunk bitmap survives a restart: present chunks are not fetched again', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(10 * CHUNK + 77, 33)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  const cacheDir = join(dir, 'cache')

  const first = await openCache(defer, cacheDir, store)
  const h1 = await first.open(layer.digest)
  assert.ok(Buffer.from(await h1.read(0, 4 * CHUNK)).equals(bytes.subarray(0, 4 * CHUNK)))
  await h1.close()
  await first.close()
  const bitmap = readFileSync(join(cacheDir, 'layers', digestHex(layer.digest), 'bitmap'))
  assert.equal([...bitmap], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0])

  store.requests.length = 0
  const second = await openCache(defer, cacheDir, store)
  assert.is(second.metrics().cachedBytes, 4 * CHUNK)
  const h2 = await second.open(layer.digest)
  assert.ok(Buffer.from(await h2.read(0, layer.size)).equals(bytes))
  // No manifest fetch, and only the seven missing chunks.
  assert.is(store.manifestRequests(layer.digest).length, 0)
  assert.is(store.blobRequests(layer.digest).length, 7)
  for (let i = 0; i < 4; i++) assert.is(store.blobRequests(layer.digest, { index: i, chunkBytes: CHUNK }).length, 0)
  await h2.close()
  await second.close()

  // Everything is on disk now: a third run reads the layer with the store gone.
  await store.stop()
  const third = await openCache(defer, cacheDir, store)
  const h3 = await third.open(layer.digest)
  assert.ok(Buffer.from(await h3.read(0, layer.size)).equals(bytes))
  assert.is(third.metrics().bytesFetched, 0)
  assert.is(third.metrics().hitRatio, 1)
  await h3.close()
}))

test('a damaged cache directory is repaired at start-up', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(3 * CHUNK, 34)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  const cacheDir = join(dir, 'cache')
  const first = await openCache(defer, cacheDir, store)
  await readAll(first, layer, bytes)
  await first.close()
  const { mkdirSync, writeFileSync } = await import('node:fs')
  const layerDir = join(cacheDir, 'layers', digestHex(layer.digest))
  writeFileSync(join(layerDir, 'bitmap'), Buffer.from([1])) // wrong length: reset
  mkdirSync(join(cacheDir, 'layers', 'junk'))
  mkdirSync(join(cacheDir, 'layers', 'f'.repeat(64))) // no manifest: an interrupted creation
  const second = await openCache(defer, cacheDir, store)
  assert.not.ok(existsSync(join(cacheDir, 'layers', 'junk')))
  assert.not.ok(existsSync(join(cacheDir, 'layers', 'f'.repeat(64))))
  assert.is(second.metrics().cachedBytes, 0)
  store.requests.length = 0
  await readAll(second, layer, bytes)
  assert.is(store.blobRequests(layer.digest).length, 3)
}))

test('a cold start records the chunks it reads; prefetch fetches them at the next cold start', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(16 * CHUNK, 44)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  const cacheDir = join(dir, 'cache')
  const hex = digestHex(layer.digest)
  const cache = await openCache(defer, cacheDir, store, { prefetchConcurrency: 1 })

  // Cold start: chunks 5, 1, 9 (and 5 again) are read.
  const h = await cache.open(layer.digest)
  for (const i of [5, 1, 5, 9]) await h.read(i * CHUNK + 7, 100)
  await h.close()
  const record = JSON.parse(readFileSync(join(cacheDir, 'access', `${hex}.json`), 'utf8'))
  assert.equal(record, { digest: layer.digest, chunkBytes: CHUNK, chunks: [5, 1, 9] })
  // A warm open is not a cold start: its reads do not change the record.
  const warm = await cache.open(layer.digest)
  await warm.read(12 * CHUNK, 10)
  await warm.close()
  assert.equal(JSON.parse(readFileSync(join(cacheDir, 'access', `${hex}.json`), 'utf8')).chunks, [5, 1, 9])

  // The layer leaves the node; the record stays.
  assert.is(await cache.evict(layer.digest), true)
  store.requests.length = 0
  const result = await cache.prefetch(layer.digest)
  assert.equal(result, { digest: layer.digest, chunks: 3, fetched: 3, failed: 0 })
  assert.equal(store.blobRequests(layer.digest).map((r) => r.range), [5, 1, 9].map((i) => `bytes=${i * CHUNK}-${(i + 1) * CHUNK - 1}`))
  assert.is(cache.metrics().prefetchedChunks, 3)
  // The sandbox's reads of those chunks are now hits.
  const next = await cache.open(layer.digest)
  for (const i of [5, 1, 9]) assert.ok(Buffer.from(await next.read(i * CHUNK, CHUNK)).equals(bytes.subarray(i * CHUNK, (i + 1) * CHUNK)))
  assert.is(store.blobRequests(layer.digest).length, 3)
  await next.close()
  // Prefetching again fetches nothing; a layer without a record has nothing to prefetch.
  assert.equal(await cache.prefetch(layer.digest), { digest: layer.digest, chunks: 3, fetched: 0, failed: 0 })
  const other = await pushBytes(dir, root, 'other.img', seededBytes(CHUNK, 45), CHUNK)
  assert.equal(await cache.prefetch(other.digest), { digest: other.digest, chunks: 0, fetched: 0, failed: 0 })
}))

test('with autoPrefetch, a cold open starts the prefetch by itself', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(8 * CHUNK, 55)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  const cacheDir = join(dir, 'cache')
  const first = await openCache(defer, cacheDir, store, { autoPrefetch: true })
  const h = await first.open(layer.digest)
  for (const i of [2, 6]) await h.read(i * CHUNK, 1)
  await h.close()
  await first.evict(layer.digest)
  await first.close()

  store.requests.length = 0
  const second = await openCache(defer, cacheDir, store, { autoPrefetch: true })
  const prefetched = new Promise<PrefetchResult>((resolve) => second.once('prefetched', resolve))
  const h2 = await second.open(layer.digest)
  assert.equal(await prefetched, { digest: layer.digest, chunks: 2, fetched: 2, failed: 0 })
  assert.is(store.blobRequests(layer.digest).length, 2)
  assert.ok(Buffer.from(await h2.read(6 * CHUNK, CHUNK)).equals(bytes.subarray(6 * CHUNK, 7 * CHUNK)))
  assert.is(store.blobRequests(layer.digest).length, 2)
  await h2.close()
}))

test.run()
