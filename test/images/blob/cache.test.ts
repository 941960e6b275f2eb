import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError } from '../../../src/errors.js'
import { createLayerCache, type LayerCache, type LayerCacheOptions } from '../../../src/images/blob/index.js'
import { timed, type Cleanup } from '../../support/index.js'
import { prng, pushBytes, seededBytes, sha256Hex, startStore, tempDir, TOKEN } from './helpers.js'

const CHUNK = 64 * 1024

async function setup (defer: Cleanup['defer'], size: number, options: Partial<LayerCacheOptions> = {}) {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(size, 11)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  const cache = await createLayerCache({ dir: join(dir, 'cache'), baseUrl: store.url, token: TOKEN, fetchTimeoutMs: 5000, autoPrefetch: false, ...options })
  defer(() => cache.close())
  return { dir, root, bytes, layer, store, cache }
}

test('every byte read through the cache equals the source', timed(30_000, async (defer) => {
  const size = 17 * CHUNK + 1234 // a short last chunk
  const { bytes, layer, cache, store } = await setup(defer, size)
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  assert.is(h.size, size)
  assert.is(h.chunkBytes, CHUNK)
  const rand = prng(42)
  // Random reads: any offset, lengths from 1 byte to three chunks, many across chunk boundaries.
  for (let n = 0; n < 300; n++) {
    const offset = rand(size)
    const length = 1 + rand(3 * CHUNK)
    const got = await h.read(offset, length)
    const want = bytes.subarray(offset, Math.min(size, offset + length))
    assert.is(got.length, want.length, `read ${offset}+${length}`)
    assert.ok(Buffer.from(got).equals(want), `read ${offset}+${length}`)
  }
  // Reads straddling each boundary exactly.
  for (let i = 1; i <= 17; i++) {
    const got = await h.read(i * CHUNK - 3, 6)
    assert.ok(Buffer.from(got).equals(bytes.subarray(i * CHUNK - 3, i * CHUNK + 3)), `boundary ${i}`)
  }
  // The whole file in random-sized pieces, hashed: the layer's own digest.
  const hash = createHash('sha256')
  for (let pos = 0; pos < size;) {
    const piece = await h.read(pos, 1 + rand(2 * CHUNK))
    hash.update(piece)
    pos += piece.length
  }
  assert.is(`sha256:${hash.digest('hex')}`, layer.digest)
  assert.is(`sha256:${sha256Hex(bytes)}`, layer.digest)
  // Past the end: nothing; at the end: the tail.
  assert.is((await h.read(size, 10)).length, 0)
  assert.is((await h.read(size + 100, 10)).length, 0)
  assert.is((await h.read(size - 2, 10)).length, 2)
  assert.is((await h.read(5, 0)).length, 0)
  // Each chunk crossed the wire exactly once.
  await cache.idle()
  const m = cache.metrics()
  assert.is(m.bytesFetched, size)
  assert.is(m.chunksFetched, 18)
  assert.is(store.blobRequests(layer.digest).length, 18)
  assert.is(m.cachedBytes, size)
  assert.ok(m.bytesServed > size)
  assert.ok(m.hitRatio > 0.5 && m.hitRatio < 1, `hit ratio ${m.hitRatio}`)
  assert.is(m.fetchFailures, 0)
  assert.is(m.corruptChunks, 0)
}))

test('concurrent reads of one chunk cause one fetch; two opens share one manifest fetch', timed(20_000, async (defer) => {
  const { bytes, layer, cache, store } = await setup(defer, 8 * CHUNK)
  const [a, b] = await Promise.all([cache.open(layer.digest), cache.open(layer.digest)])
  defer(() => a!.close())
  defer(() => b!.close())
  assert.is(store.manifestRequests(layer.digest).length, 1)
  const reads: Array<Promise<Uint8Array>> = []
  const spans: Array<[number, number]> = []
  for (let i = 0; i < 40; i++) {
    const offset = 3 * CHUNK + i * 1000
    const length = i % 5 === 0 ? CHUNK : 500 // some spill into chunk 4
    spans.push([offset, length])
    reads.push((i % 2 === 0 ? a! : b!).read(offset, length))
  }
  const results = await Promise.all(reads)
  results.forEach((got, i) => {
    const [offset, length] = spans[i]!
    assert.ok(Buffer.from(got).equals(bytes.subarray(offset, offset + length)), `read ${i}`)
  })
  assert.is(store.blobRequests(layer.digest, { index: 3, chunkBytes: CHUNK }).length, 1)
  assert.is(store.blobRequests(layer.digest, { index: 4, chunkBytes: CHUNK }).length, 1)
  assert.is(store.blobRequests(layer.digest).length, 2)
}))

test('bad arguments, closed handles and a wrong token give coded errors', timed(20_000, async (defer) => {
  const { layer, cache, store, dir } = await setup(defer, 2 * CHUNK)
  for (const bad of ['sha256:abc', 'latest', `sha256:${'A'.repeat(64)}`]) {
    await cache.open(bad).then(() => assert.unreachable(bad), (err) => assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'), bad))
  }
  await cache.open(`sha256:${'0'.repeat(64)}`).then(() => assert.unreachable('unknown layer opened'), (err) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_NOT_FOUND'), String(err))
    assert.is(err.details?.errno, 'EIO')
  })
  const h = await cache.open(layer.digest)
  await h.read(-1, 5).then(() => assert.unreachable('negative offset'), (err) => assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT')))
  await h.read(0, 1.5).then(() => assert.unreachable('fractional length'), (err) => assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT')))
  await h.close()
  await h.close()
  await h.read(0, 5).then(() => assert.unreachable('read after close'), (err) => assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT')))
  const stranger = await createLayerCache({ dir: join(dir, 'other-cache'), baseUrl: store.url, token: 'wrong', autoPrefetch: false })
  defer(() => stranger.close())
  const failures: string[] = []
  stranger.on('fetchFailed', (e) => failures.push(e.error.code))
  await stranger.open(layer.digest).then(() => assert.unreachable('wrong token accepted'), (err) => assert.ok(isWarrenError(err, 'WARREN_ERR_UNAUTHENTICATED'), String(err)))
  assert.equal(failures, ['WARREN_ERR_UNAUTHENTICATED'])
}))

test('a store that ignores Range is refused rather than downloaded whole', timed(20_000, async (defer) => {
  const { layer, dir } = await setup(defer, 4 * CHUNK)
  const { createServer } = await import('node:http')
  const { readFileSync } = await import('node:fs')
  const root = join(dir, 'store')
  // A naive static server: always the whole file.
  const naive = createServer((req, res) => {
    try {
      res.end(readFileSync(join(root, ...(req.url ?? '').split('/'))))
    } catch {
      res.writeHead(404).end()
    }
  })
  await new Promise<void>((resolve) => naive.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise<void>((resolve) => { naive.close(() => resolve()); naive.closeAllConnections() }))
  const port = (naive.address() as { port: number }).port
  const cache: LayerCache = await createLayerCache({ dir: join(dir, 'naive-cache'), baseUrl: `http://127.0.0.1:${port}`, autoPrefetch: false })
  defer(() => cache.close())
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  await h.read(CHUNK, 10).then(() => assert.unreachable('whole-object answer accepted'), (err) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_BACKEND_UNAVAILABLE'))
    assert.is(err.details?.reason, 'no-range')
  })
}))

test.run()
