import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError, type WarrenError } from '../../../src/errors.js'
import { createLayerCache, digestHex, type LayerCacheEvents } from '../../../src/images/blob/index.js'
import { timed, waitFor, type Cleanup } from '../../support/index.js'
import { pushBytes, seededBytes, startGate, startStore, tempDir, TOKEN } from './helpers.js'

const CHUNK = 16 * 1024

async function setup (defer: Cleanup['defer'], size: number) {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(size, 21)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, CHUNK)
  const store = await startStore(defer, root)
  return { dir, root, bytes, layer, store }
}

/** Overwrites bytes of a file in place, synchronously (inside a server event, before it reads). */
function patch (path: string, position: number, bytes: Uint8Array): void {
  const fd = openSync(path, 'r+')
  try { writeSync(fd, bytes, 0, bytes.length, position) } finally { closeSync(fd) }
}

test('the store stopped mid-read: the read rejects with a coded EIO error, then succeeds after a restart', timed(20_000, async (defer) => {
  const { dir, bytes, layer, store } = await setup(defer, 12 * CHUNK)
  const cache = await createLayerCache({ dir: join(dir, 'cache'), baseUrl: store.url, token: TOKEN, fetchTimeoutMs: 10_000, autoPrefetch: false })
  defer(() => cache.close())
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  const failures: Array<LayerCacheEvents['fetchFailed'][0]> = []
  cache.on('fetchFailed', (e) => failures.push(e))
  // The first chunk request to arrive stops the server before it is answered.
  store.server.once('request', () => { void store.stop() })
  let err: WarrenError | undefined
  await h.read(0, bytes.length).catch((e: WarrenError) => { err = e })
  assert.ok(err !== undefined, 'the read did not reject')
  assert.ok(isWarrenError(err, 'WARREN_ERR_BACKEND_UNAVAILABLE'), String(err))
  assert.is(err.details?.errno, 'EIO')
  assert.is(err.details?.reason, 'unreachable')
  assert.ok(failures.length >= 1)
  assert.is(failures[0]!.digest, layer.digest)
  await cache.idle()
  const cachedBefore = cache.metrics().cachedBytes
  assert.ok(cachedBefore < bytes.length)
  await store.restart()
  const again = await h.read(0, bytes.length)
  assert.ok(Buffer.from(again).equals(bytes))
}))

test('a store that stops answering: the read times out with WARREN_ERR_TIMEOUT, and works once it answers again', timed(20_000, async (defer) => {
  const { dir, bytes, layer, store } = await setup(defer, 4 * CHUNK)
  const gate = await startGate(defer, () => store.url)
  const cache = await createLayerCache({ dir: join(dir, 'cache'), baseUrl: gate.url, token: TOKEN, fetchTimeoutMs: 300, autoPrefetch: false })
  defer(() => cache.close())
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  const events: string[] = []
  cache.on('fetchFailed', (e) => events.push(e.error.code))
  gate.hold = true
  const err = await h.read(CHUNK + 10, 100).then(() => undefined, (e: WarrenError) => e)
  assert.ok(isWarrenError(err, 'WARREN_ERR_TIMEOUT'), String(err))
  assert.is(err.details?.errno, 'EIO')
  assert.is(err.details?.chunk, 1)
  assert.equal(events, ['WARREN_ERR_TIMEOUT'])
  // The held request was abandoned by the client, not left open.
  await waitFor(() => gate.held === 0, 5000, 'the held request to be dropped')
  gate.hold = false
  const got = await h.read(CHUNK + 10, 100)
  assert.ok(Buffer.from(got).equals(bytes.subarray(CHUNK + 10, CHUNK + 110)))
  assert.is(cache.metrics().fetchFailures, 1)
}))

test('a chunk corrupted once is detected and refetched; the read succeeds', timed(20_000, async (defer) => {
  const { dir, bytes, layer, store, root } = await setup(defer, 6 * CHUNK)
  const blob = join(root, 'blobs', 'sha256', digestHex(layer.digest))
  const cache = await createLayerCache({ dir: join(dir, 'cache'), baseUrl: store.url, token: TOKEN, autoPrefetch: false })
  defer(() => cache.close())
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  const corrupt: number[] = []
  cache.on('corruptChunk', (e) => corrupt.push(e.attempt))
  // The first request for chunk 2 sees damaged bytes; the file is repaired before the second.
  let seen = 0
  store.server.on('request', (info) => {
    if (info.range?.startsWith(`bytes=${2 * CHUNK}-`) !== true) return
    seen++
    patch(blob, 2 * CHUNK + 100, seen === 1 ? Buffer.from('garbage') : bytes.subarray(2 * CHUNK + 100, 2 * CHUNK + 107))
  })
  const got = await h.read(2 * CHUNK, CHUNK)
  assert.ok(Buffer.from(got).equals(bytes.subarray(2 * CHUNK, 3 * CHUNK)))
  assert.equal(corrupt, [1])
  assert.is(store.blobRequests(layer.digest, { index: 2, chunkBytes: CHUNK }).length, 2)
  assert.is(cache.metrics().corruptChunks, 1)
}))

test('a chunk corrupted on the store is not cached: EIO after one refetch, good once the store is repaired', timed(20_000, async (defer) => {
  const { dir, bytes, layer, store, root } = await setup(defer, 6 * CHUNK)
  const blob = join(root, 'blobs', 'sha256', digestHex(layer.digest))
  const cacheDir = join(dir, 'cache')
  const cache = await createLayerCache({ dir: cacheDir, baseUrl: store.url, token: TOKEN, autoPrefetch: false })
  defer(() => cache.close())
  const h = await cache.open(layer.digest)
  defer(() => h.close())
  patch(blob, 3 * CHUNK + 5, Buffer.from('bit rot'))
  const err = await h.read(3 * CHUNK, 10).then(() => undefined, (e: WarrenError) => e)
  assert.ok(isWarrenError(err, 'WARREN_ERR_BACKEND_UNAVAILABLE'), String(err))
  assert.is(err.details?.reason, 'corrupt')
  assert.is(err.details?.errno, 'EIO')
  assert.is(err.details?.chunk, 3)
  assert.is(store.blobRequests(layer.digest, { index: 3, chunkBytes: CHUNK }).length, 2)
  await cache.idle()
  assert.is(cache.metrics().cachedBytes, 0)
  const bitmap = readFileSync(join(cacheDir, 'layers', digestHex(layer.digest), 'bitmap'))
  assert.is(bitmap[3], 0)
  // Still bad: fetched again (not served from a cached bad copy), still refused.
  await h.read(3 * CHUNK, 10).then(() => assert.unreachable('bad chunk served'), () => undefined)
  assert.is(store.blobRequests(layer.digest, { index: 3, chunkBytes: CHUNK }).length, 4)
  patch(blob, 3 * CHUNK + 5, bytes.subarray(3 * CHUNK + 5, 3 * CHUNK + 12))
  const got = await h.read(3 * CHUNK, CHUNK)
  assert.ok(Buffer.from(got).equals(bytes.subarray(3 * CHUNK, 4 * CHUNK)))
  assert.is(cache.metrics().corruptChunks, 4)
}))

test('closing the cache rejects reads in flight instead of leaving them hanging', timed(20_000, async (defer) => {
  const { dir, layer, store } = await setup(defer, 4 * CHUNK)
  const gate = await startGate(defer, () => store.url)
  const cache = await createLayerCache({ dir: join(dir, 'cache'), baseUrl: gate.url, token: TOKEN, fetchTimeoutMs: 60_000, autoPrefetch: false })
  const h = await cache.open(layer.digest)
  gate.hold = true
  const pending = h.read(0, 10).then(() => undefined, (e: WarrenError) => e)
  await waitFor(() => gate.held === 1, 5000, 'the request to be held')
  await cache.close()
  const err = await pending
  assert.ok(isWarrenError(err, 'WARREN_ERR_BACKEND_UNAVAILABLE'), String(err))
  assert.is(err.details?.reason, 'closed')
  await h.close()
}))

test.run()
