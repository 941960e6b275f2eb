import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { digestHex, serializeManifest } from '../../../src/images/blob/index.js'
import { timed, waitFor } from '../../support/index.js'
import { auth, pushBytes, rawRequest, seededBytes, startRequest, startStore, tempDir } from './helpers.js'

const SIZE = 100_000

async function fixture (defer: Parameters<Parameters<typeof timed>[1]>[0]) {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(SIZE, 7)
  const layer = await pushBytes(dir, root, 'layer.img', bytes, 16384)
  const store = await startStore(defer, root)
  return { dir, root, bytes, layer, store, path: `/blobs/sha256/${digestHex(layer.digest)}` }
}

test('no token, a wrong token or another scheme: 401, and nothing else is revealed', timed(10_000, async (defer) => {
  const { store, path } = await fixture(defer)
  const headerSets: Array<Record<string, string>> = [{}, { authorization: 'Bearer wrong' }, { authorization: 'Basic am9pbi10b2tlbg==' }, { authorization: 'Bearer' }]
  for (const headers of headerSets) {
    for (const p of [path, '/blobs/sha256/nope', '/']) {
      const res = await rawRequest(store.url, p, { headers })
      assert.is(res.status, 401, `${JSON.stringify(headers)} ${p}`)
      assert.is(res.headers['www-authenticate'], 'Bearer realm="warren-blobs"')
      assert.is(res.body.toString(), 'unauthorized\n')
    }
  }
}))

test('full GET, HEAD and the manifest', timed(10_000, async (defer) => {
  const { store, path, bytes, layer } = await fixture(defer)
  const full = await rawRequest(store.url, path, { headers: auth })
  assert.is(full.status, 200)
  assert.ok(full.body.equals(bytes))
  assert.is(full.headers['content-length'], String(SIZE))
  assert.is(full.headers['accept-ranges'], 'bytes')
  assert.is(full.headers.etag, `"${layer.digest}"`)
  const head = await rawRequest(store.url, path, { method: 'HEAD', headers: auth })
  assert.is(head.status, 200)
  assert.is(head.headers['content-length'], String(SIZE))
  assert.is(head.body.length, 0)
  const headRange = await rawRequest(store.url, path, { method: 'HEAD', headers: { ...auth, range: 'bytes=0-9' } })
  assert.is(headRange.status, 206)
  assert.is(headRange.headers['content-length'], '10')
  const m = await rawRequest(store.url, `/manifests/sha256/${digestHex(layer.digest)}.json`, { headers: auth })
  assert.is(m.status, 200)
  assert.is(m.headers['content-type'], 'application/json')
  assert.is(m.body.toString(), serializeManifest(layer.manifest))
  const missing = await rawRequest(store.url, `/blobs/sha256/${'0'.repeat(64)}`, { headers: auth })
  assert.is(missing.status, 404)
  const post = await rawRequest(store.url, path, { method: 'POST', headers: auth })
  assert.is(post.status, 405)
  assert.is(post.headers.allow, 'GET, HEAD')
}))

test('Range: 206 with Content-Range, clamping, suffixes; 416 when unsatisfiable; ignored when malformed', timed(10_000, async (defer) => {
  const { store, path, bytes } = await fixture(defer)
  const cases: Array<[string, number, number]> = [
    ['bytes=0-0', 0, 0],
    ['bytes=16380-16399', 16380, 16399],
    ['bytes=99990-', 99990, SIZE - 1],
    ['bytes=-5', SIZE - 5, SIZE - 1],
    ['bytes=50000-999999', 50000, SIZE - 1]
  ]
  for (const [range, start, end] of cases) {
    const res = await rawRequest(store.url, path, { headers: { ...auth, range } })
    assert.is(res.status, 206, range)
    assert.is(res.headers['content-range'], `bytes ${start}-${end}/${SIZE}`, range)
    assert.is(res.headers['content-length'], String(end - start + 1), range)
    assert.ok(res.body.equals(bytes.subarray(start, end + 1)), range)
  }
  for (const range of [`bytes=${SIZE}-`, `bytes=${SIZE + 5}-${SIZE + 10}`, 'bytes=-0', 'bytes=0-1,5-6']) {
    const res = await rawRequest(store.url, path, { headers: { ...auth, range } })
    assert.is(res.status, 416, range)
    assert.is(res.headers['content-range'], `bytes */${SIZE}`, range)
  }
  for (const range of ['items=0-5', 'bytes=9-2']) {
    const res = await rawRequest(store.url, path, { headers: { ...auth, range } })
    assert.is(res.status, 200, range)
    assert.is(res.body.length, SIZE, range)
  }
}))

test('paths are matched exactly: traversal, encodings, symlinks and near-misses are 404', timed(10_000, async (defer) => {
  const { store, root, path, layer } = await fixture(defer)
  const secret = 'TOP-SECRET-CONTENT'
  writeFileSync(join(root, 'secret'), secret)
  writeFileSync(join(root, 'blobs', 'secret'), secret)
  mkdirSync(join(root, 'manifests', 'sha256', 'sub'), { recursive: true })
  // A symlink planted under a valid key is not followed.
  const linkHex = 'f'.repeat(64)
  symlinkSync(join(root, 'secret'), join(root, 'blobs', 'sha256', linkHex))
  const hex = digestHex(layer.digest)
  const attempts = [
    '/blobs/sha256/../../secret',
    '/blobs/sha256/../secret',
    '/blobs/sha256/..%2F..%2Fsecret',
    '/blobs/sha256/%2e%2e/%2e%2e/secret',
    '/blobs/sha256/..\\..\\secret',
    '/manifests/sha256/../../secret',
    `/manifests/sha256/${hex}.json/../../../secret`,
    `/blobs/sha256/${hex}/`,
    `/blobs/sha256/${hex}?x=1`,
    `/blobs/sha256/${hex.toUpperCase()}`,
    `/blobs/sha256/${hex}%00`,
    `//blobs/sha256/${hex}`,
    `/blobs/sha512/${hex}`,
    `/manifests/sha256/${hex}`,
    `http://localhost${path}`,
    '/secret',
    `/blobs/sha256/${linkHex}`
  ]
  for (const p of attempts) {
    const res = await rawRequest(store.url, p, { headers: auth })
    assert.is(res.status, 404, p)
    assert.not.ok(res.body.toString().includes(secret), p)
  }
}))

test('bounded concurrency: past the slots requests wait, past the queue they get 503', timed(20_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  // Large enough that an unread response cannot fit in the socket buffers: it holds its slot.
  const big = await pushBytes(dir, root, 'big.img', Buffer.alloc(48 * 1024 * 1024, 1), 1024 * 1024)
  const small = await pushBytes(dir, root, 'small.img', seededBytes(1000, 1), 4096)
  const store = await startStore(defer, root, { maxConcurrent: 1, maxQueued: 1 })
  const holder = await startRequest(store.url, `/blobs/sha256/${digestHex(big.digest)}`, { headers: auth })
  defer(() => holder.req.destroy())
  assert.is(holder.res.statusCode, 200)
  const queued = rawRequest(store.url, `/blobs/sha256/${digestHex(small.digest)}`, { headers: auth })
  await waitFor(() => store.requests.length === 2, 5000, 'the second request to arrive')
  const refused = await rawRequest(store.url, `/blobs/sha256/${digestHex(small.digest)}`, { headers: auth })
  assert.is(refused.status, 503)
  assert.is(refused.headers['retry-after'], '1')
  // The holder leaves: the queued request gets the slot.
  holder.req.destroy()
  const served = await queued
  assert.is(served.status, 200)
  assert.is(served.body.length, 1000)
}))

test.run()
