/**
 * Builds push layers to the control plane's blob store over HTTP: chunked, resumable, checked
 * by digest on arrival, with nothing half-written ever visible, against a real control plane.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes } from '../../../src/errors.js'
import { serializeManifest, storePaths } from '../../../src/images/blob/index.js'
import { pushLayerOverHttp } from '../../../src/images/upload/index.js'
import { timed } from '../../support/index.js'
import { begin, call, CHUNK, KiB, layerFile, patch, uploadCluster, uploadPath } from './helpers.js'
import { createLogger } from '../../../src/log/index.js'
import { captureLog } from '../../support/log-capture.js'

const SIZE = 20 * CHUNK + 123

test('a layer pushed over HTTP lands in the blob store with its chunk manifest, readable by nodes; pushing it again sends nothing', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 1)
  let requests = 0
  const pushed = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK, onProgress: () => { requests++ } })
  assert.is(pushed.digest, layer.manifest.digest)
  assert.is(pushed.sentBytes, SIZE)
  assert.is(requests, Math.ceil(21 / 4), 'chunks travel in runs of at most the request size (256 KiB here)')
  const paths = storePaths(c.blobs, pushed.digest)
  assert.ok(readFileSync(paths.blob).equals(layer.bytes), 'the stored layer is the file, byte for byte')
  assert.is(readFileSync(paths.manifest, 'utf8'), serializeManifest(layer.manifest), 'the chunk manifest lazy loading reads is stored beside it')
  // What a node's layer cache asks for: the manifest and a chunk, with the join token.
  const manifest = await call(c, 'GET', `/manifests/sha256/${pushed.digest.slice(7)}.json`, c.cp.joinToken)
  assert.is(manifest.status, 200)
  assert.equal(manifest.body, JSON.parse(serializeManifest(layer.manifest)))
  assert.equal(readdirSync(c.staging).flatMap((t) => readdirSync(`${c.staging}/${t}`)), [], 'nothing is left staged after the commit')

  const again = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK })
  assert.equal([again.existed, again.sentBytes], [true, 0])
}))

test('pushes of the same bytes at once all succeed: the one that finds the upload committed under it begins again and finds the layer stored', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'same.img', SIZE, 9)
  const pushes = await Promise.all(Array.from({ length: 3 }, async () => await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK })))
  assert.equal(pushes.map((p) => p.digest), [layer.manifest.digest, layer.manifest.digest, layer.manifest.digest])
  assert.ok(readFileSync(storePaths(c.blobs, layer.manifest.digest).blob).equals(layer.bytes))
}))

test('an interrupted push resumes: run again, it sends only the chunks the store does not hold, and nothing is visible before the commit', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 2)
  const digest = layer.manifest.digest
  const opened = await begin(c, c.keys.builder, layer.manifest)
  assert.is(opened.status, 200, JSON.stringify(opened.body))
  assert.equal(opened.body.missing, [[0, 21]])
  // The first push dies after three runs of four chunks.
  for (let run = 0; run < 3; run++) {
    const r = await patch(c, c.keys.builder, digest, layer.bytes, run * 4 * CHUNK, (run + 1) * 4 * CHUNK)
    assert.is(r.status, 200, JSON.stringify(r.body))
  }
  assert.is((await call(c, 'GET', `/blobs/sha256/${digest.slice(7)}`, c.cp.joinToken)).status, 404, 'a half-pushed layer is not served')
  assert.not.ok(existsSync(storePaths(c.blobs, digest).blob))
  const tag = await c.admin.request({ type: 'image-tag', name: 'half:1', digest, kind: 'base' }).catch((e: unknown) => e)
  assert.is((tag as { code?: string }).code, ErrorCodes.NOT_FOUND, 'a half-pushed layer cannot be tagged')

  const resumed = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK })
  assert.is(resumed.sentBytes, SIZE - 12 * CHUNK, 'only the chunks the store lacked were sent')
  assert.ok(readFileSync(storePaths(c.blobs, digest).blob).equals(layer.bytes))
}))

test('bytes that do not match the manifest are refused on arrival, and a manifest whose digest is not its bytes\' is refused at commit; nothing is stored', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 3)
  const digest = layer.manifest.digest
  assert.is((await begin(c, c.keys.builder, layer.manifest)).status, 200)
  const corrupt = Buffer.from(layer.bytes.subarray(0, 4 * CHUNK))
  corrupt[3 * CHUNK + 17]! ^= 0x01
  const refused = await call(c, 'PATCH', uploadPath(digest), c.keys.builder, corrupt, { 'upload-offset': '0' })
  assert.is(refused.status, 400)
  assert.equal([refused.body.code, refused.body.details.field, refused.body.details.chunk], [ErrorCodes.INVALID_ARGUMENT, 'chunk', 3])
  const status = await begin(c, c.keys.builder, layer.manifest)
  assert.equal(status.body.missing, [[0, 21]], 'a body with one bad chunk stores none of its chunks')
  // Misaligned and ragged bodies are refused too.
  assert.is((await patch(c, c.keys.builder, digest, layer.bytes, 100, CHUNK + 100)).body.details.field, 'offset')
  assert.is((await patch(c, c.keys.builder, digest, layer.bytes, 0, CHUNK + 100)).body.details.field, 'body')

  // Every chunk is right, but the manifest claims the layer is other bytes.
  const other = await layerFile(c.dir, 'other.img', 1000, 4)
  const lie = { ...layer.manifest, digest: other.manifest.digest }
  assert.is((await begin(c, c.keys.builder, lie)).status, 200)
  for (let at = 0; at < SIZE; at += 4 * CHUNK) {
    assert.is((await patch(c, c.keys.builder, lie.digest, layer.bytes, at, Math.min(SIZE, at + 4 * CHUNK))).status, 200)
  }
  const commit = await call(c, 'POST', `${uploadPath(lie.digest)}/commit`, c.keys.builder)
  assert.is(commit.status, 400)
  assert.equal([commit.body.code, commit.body.details.field, commit.body.details.reason], [ErrorCodes.INVALID_ARGUMENT, 'digest', 'digest-mismatch'])
  assert.not.ok(existsSync(storePaths(c.blobs, lie.digest).blob), 'nothing is stored under a digest its bytes do not have')
  assert.not.ok(existsSync(storePaths(c.blobs, lie.digest).manifest))
  assert.is((await call(c, 'POST', `${uploadPath(lie.digest)}/commit`, c.keys.builder)).body.code, ErrorCodes.NOT_FOUND, 'the refused upload is gone with its bytes')
}))

test('only a key that may push uploads layers: no token is UNAUTHENTICATED, a sandbox key or the join token FORBIDDEN; another tenant cannot touch an upload', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 5)
  const body = JSON.stringify({ kind: 'base', manifest: layer.manifest })
  // The join token pushes what nodes make (snapshots, records), never a layer operators build.
  for (const [token, code, status] of [[undefined, ErrorCodes.UNAUTHENTICATED, 401], [c.cp.joinToken, ErrorCodes.FORBIDDEN, 403],
    ['wrn_aaaaaaaaaaaa_' + 'b'.repeat(43), ErrorCodes.UNAUTHENTICATED, 401], [c.keys.tenant, ErrorCodes.FORBIDDEN, 403]] as const) {
    const r = await call(c, 'POST', uploadPath(layer.manifest.digest), token, body)
    assert.equal([r.status, r.body.code], [status, code], String(token).slice(0, 12))
  }
  const viaSdk = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.tenant, kind: 'base' }).catch((e: unknown) => e)
  assert.is((viaSdk as { code?: string }).code, ErrorCodes.FORBIDDEN)
  for (const kind of ['snapshot', 'record'] as const) {
    const r = await call(c, 'POST', uploadPath(layer.manifest.digest), c.keys.builder, JSON.stringify({ kind, manifest: layer.manifest }))
    assert.equal([r.status, r.body.code, r.body.details?.field], [403, ErrorCodes.FORBIDDEN, 'kind'], `an operator's key does not push ${kind} blobs`)
  }
  assert.not.ok(existsSync(c.staging) && readdirSync(c.staging).length > 0, 'a refused begin stages nothing')

  // A node's join token pushes a record, which can then never be stacked as a layer.
  const record = await layerFile(c.dir, 'record.bin', CHUNK + 7, 9)
  const pushed = await pushLayerOverHttp(record.file, { url: c.cp.url, token: c.cp.joinToken, kind: 'record', chunkBytes: CHUNK })
  assert.ok(existsSync(storePaths(c.blobs, pushed.digest).blob), 'the join token pushes a record')

  // The admin key may push; builder's upload is builder's alone.
  assert.is((await begin(c, c.keys.admin, layer.manifest)).status, 200)
  assert.is((await begin(c, c.keys.builder, layer.manifest)).status, 200)
  assert.is((await patch(c, c.keys.builder, layer.manifest.digest, layer.bytes, 0, 4 * CHUNK)).status, 200)
  const digest = layer.manifest.digest
  assert.is((await patch(c, c.keys.other, digest, layer.bytes, 4 * CHUNK, 8 * CHUNK)).body.code, ErrorCodes.NOT_FOUND)
  assert.is((await call(c, 'POST', `${uploadPath(digest)}/commit`, c.keys.other)).body.code, ErrorCodes.NOT_FOUND)
  assert.is((await call(c, 'DELETE', uploadPath(digest), c.keys.other)).body.code, ErrorCodes.NOT_FOUND)
  assert.equal((await begin(c, c.keys.builder, layer.manifest)).body.missing, [[4, 21]], 'builder\'s upload is as builder left it')
  // Paths are matched exactly: nothing else under /uploads/ is an upload.
  for (const path of ['/uploads/', `/uploads/sha256/${digest.slice(7)}/../x`, `/uploads/sha256/${digest.slice(7).toUpperCase()}`, `/uploads/sha256/${digest.slice(7)}/commit/x`]) {
    assert.is((await call(c, 'POST', path, c.keys.builder, body)).status, 404, path)
  }
}))

test('uploads are bounded: a layer over the maximum and a body over the request size are refused before they are read; a tenant has at most its uploads open', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer, { maxRequestBytes: 256 * KiB, maxLayerBytes: 2 * 1024 * KiB, maxUploadsPerTenant: 2 })
  const big = await layerFile(c.dir, 'big.img', 2 * 1024 * KiB + 1, 6)
  const over = await begin(c, c.keys.builder, big.manifest)
  assert.equal([over.status, over.body.code, over.body.details.field], [413, ErrorCodes.INVALID_ARGUMENT, 'size'])
  const viaClient = await pushLayerOverHttp(big.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK }).catch((e: unknown) => e)
  assert.is((viaClient as { details?: { field?: string } }).details?.field, 'size')

  const a = await layerFile(c.dir, 'a.img', SIZE, 7)
  assert.is((await begin(c, c.keys.builder, a.manifest)).status, 200)
  const tooLong = await patch(c, c.keys.builder, a.manifest.digest, a.bytes, 0, 5 * CHUNK)
  assert.equal([tooLong.status, tooLong.body.details.field], [413, 'body'])
  const hugeChunks = await begin(c, c.keys.builder, { ...a.manifest, chunkBytes: 512 * KiB, chunks: a.manifest.chunks.slice(0, 3) })
  assert.equal([hugeChunks.status, hugeChunks.body.details.field], [400, 'chunkBytes'])

  const b = await layerFile(c.dir, 'b.img', SIZE, 8)
  const d = await layerFile(c.dir, 'd.img', SIZE, 9)
  assert.is((await begin(c, c.keys.builder, b.manifest)).status, 200)
  const third = await begin(c, c.keys.builder, d.manifest)
  assert.equal([third.status, third.body.code, third.body.details.quota], [429, ErrorCodes.QUOTA, 'uploads'])
  assert.is((await begin(c, c.keys.other, d.manifest)).status, 200, 'another tenant has its own slots')
  assert.is((await begin(c, c.keys.builder, a.manifest)).status, 200, 'resuming an open upload takes no new slot')
  assert.is((await call(c, 'DELETE', uploadPath(a.manifest.digest), c.keys.builder)).status, 204)
  assert.not.ok(existsSync(`${c.staging}/builder/${a.manifest.digest.slice(7)}`), 'an abort removes the staged bytes')
  assert.is((await begin(c, c.keys.builder, d.manifest)).status, 200, 'an abort frees the slot')
}))

test('upload requests take from the tenant\'s request rate: past it 429 QUOTA requests; another tenant goes on', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  await c.admin.setQuotas('builder', { requestsPerSecond: 0.001, requestBurst: 2 })
  const a = await layerFile(c.dir, 'a.img', SIZE, 11)
  assert.is((await begin(c, c.keys.builder, a.manifest)).status, 200)
  assert.is((await begin(c, c.keys.builder, a.manifest)).status, 200, 'a resumed begin, within the burst')
  const past = await begin(c, c.keys.builder, a.manifest)
  assert.equal([past.status, past.body.code, past.body.details.quota], [429, ErrorCodes.QUOTA, 'requests'])
  assert.is((await begin(c, c.keys.other, a.manifest)).status, 200, 'another tenant has its own rate')
  // The push client waits as told and goes on: ~23 requests at 20 a second, bursts of 2.
  await c.admin.setQuotas('other', { requestsPerSecond: 20, requestBurst: 2 })
  const b = await layerFile(c.dir, 'b.img', SIZE, 12)
  const pushed = await pushLayerOverHttp(b.file, { url: c.cp.url, token: c.keys.other, kind: 'base', chunkBytes: CHUNK })
  assert.is(pushed.digest, b.manifest.digest)
}))

test('malformed upload requests are refused naming the field, and stage nothing', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 17)
  const digest = layer.manifest.digest
  const path = uploadPath(digest)
  const post = (body: string): Promise<{ status: number, body: { code: string, details: { field: string } } }> => call(c, 'POST', path, c.keys.builder, body)
  const cases: Array<[string, string]> = [
    ['not json', 'body'], ['[1,2]', 'body'], ['null', 'body'],
    [JSON.stringify({ kind: 'root', manifest: layer.manifest }), 'kind'],
    [JSON.stringify({ kind: '__proto__', manifest: layer.manifest }), 'kind'],
    [JSON.stringify({ kind: 'base' }), 'manifest'],
    [JSON.stringify({ kind: 'base', manifest: { ...layer.manifest, digest: `sha256:${'0'.repeat(64)}` } }), 'manifest'],
    [JSON.stringify({ kind: 'base', manifest: { ...layer.manifest, size: -1 } }), 'manifest'],
    [JSON.stringify({ kind: 'base', manifest: { ...layer.manifest, chunkBytes: 1000 } }), 'manifest'],
    [JSON.stringify({ kind: 'base', manifest: { ...layer.manifest, chunks: layer.manifest.chunks.slice(1) } }), 'manifest']
  ]
  for (const [body, field] of cases) {
    const r = await post(body)
    assert.equal([r.status, r.body.code, r.body.details.field], [400, ErrorCodes.INVALID_ARGUMENT, field], body.slice(0, 60))
  }
  assert.not.ok(existsSync(c.staging) && readdirSync(c.staging).length > 0, 'nothing was staged')
  assert.is((await call(c, 'PATCH', path, c.keys.builder, layer.bytes.subarray(0, CHUNK), { 'upload-offset': '0' })).body.code, ErrorCodes.NOT_FOUND, 'chunks need a begun upload')
  assert.is((await begin(c, c.keys.builder, layer.manifest)).status, 200)
  for (const offset of ['', '-1', '1e3', '0x10', '1.5', '99999999999999999']) {
    const r = await call(c, 'PATCH', path, c.keys.builder, layer.bytes.subarray(0, CHUNK), { 'upload-offset': offset })
    assert.equal([r.status, r.body.details?.field], [400, 'offset'], JSON.stringify(offset))
  }
  assert.is((await patch(c, c.keys.builder, digest, layer.bytes, SIZE - 123 + CHUNK * 4, SIZE)).status, 400, 'an offset past the end')
  assert.is((await call(c, 'PUT', path, c.keys.builder, 'x')).body.details.field, 'method')
  assert.is((await call(c, 'GET', `${path}/commit`, c.keys.builder)).body.details.field, 'method')
  const early = await call(c, 'POST', `${path}/commit`, c.keys.builder)
  assert.equal([early.body.code, early.body.details.field], [ErrorCodes.INVALID_ARGUMENT, 'chunks'], 'a commit before every chunk is refused')
}))

test('requests handled at once are bounded: one more is OVERLOADED; a body that does not arrive in time is cut off and frees its place', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer, { maxRequestBytes: 256 * KiB, maxConcurrentRequests: 1, requestTimeoutMs: 3000 })
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 18)
  assert.is((await begin(c, c.keys.builder, layer.manifest)).status, 200)
  // A PATCH that sends its headers and half its body, then stalls.
  const stalled = httpRequest(`${c.http}${uploadPath(layer.manifest.digest)}`, {
    method: 'PATCH', headers: { authorization: `Bearer ${c.keys.builder}`, 'upload-offset': '0', 'content-length': String(4 * CHUNK) }
  })
  const answered = new Promise<number>((resolve) => {
    stalled.once('response', (res) => { res.resume(); resolve(res.statusCode ?? 0) })
    stalled.once('error', () => resolve(-1))
  })
  defer(() => stalled.destroy())
  stalled.write(layer.bytes.subarray(0, 2 * CHUNK))
  // The stalled request holds the only place once the server has begun reading it.
  let busy = await begin(c, c.keys.builder, layer.manifest)
  for (let i = 0; i < 50 && busy.status === 200; i++) busy = await begin(c, c.keys.builder, layer.manifest)
  assert.equal([busy.status, busy.body.code], [503, ErrorCodes.OVERLOADED])
  const status = await answered
  assert.ok(status === 408 || status === -1, `the stalled body was cut off (${status})`)
  assert.is((await begin(c, c.keys.builder, layer.manifest)).status, 200, 'its place is free again')
  assert.equal((await begin(c, c.keys.builder, layer.manifest)).body.missing, [[0, 21]], 'nothing of the cut-off body was stored')
}))

test('tagging a digest the store does not hold is refused with NOT_FOUND naming digest', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const missing = `sha256:${'ab'.repeat(32)}`
  const err = await c.admin.request({ type: 'image-tag', name: 'ghost:1', digest: missing, kind: 'base' }).catch((e: unknown) => e) as { code?: string, details?: { field?: string } }
  assert.equal([err.code, err.details?.field], [ErrorCodes.NOT_FOUND, 'digest'])
  assert.equal(await c.admin.request({ type: 'image-list' }), [], 'a refused tag leaves no name')
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 10)
  const pushed = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind: 'base', chunkBytes: CHUNK })
  await c.admin.request({ type: 'image-tag', name: 'real:1', digest: pushed.digest, kind: 'base' })
  assert.equal((await c.admin.request<Array<{ name: string }>>({ type: 'image-list' })).map((r) => r.name), ['real:1'])
}))

test('a refused upload request is logged once with its code, address and why; a run of bad keys is one more line with its count', timed(30_000, async (defer) => {
  const out = captureLog()
  const c = await uploadCluster(defer, undefined, createLogger({ level: 'info', destination: out }))
  const layer = await layerFile(c.dir, 'layer.img', SIZE, 6)
  const body = JSON.stringify({ kind: 'base', manifest: layer.manifest })
  for (let i = 0; i < 5; i++) {
    const r = await call(c, 'POST', uploadPath(layer.manifest.digest), 'wrn_aaaaaaaaaaaa_' + 'b'.repeat(43), body)
    assert.is(r.status, 401)
  }
  const refused = out.records().filter((r) => r.msg === 'request refused' && r.type === 'upload')
  assert.equal(refused.map((r) => [r.code, r.method, r.address]), [[ErrorCodes.UNAUTHENTICATED, 'POST', '127.0.0.1']], 'the first, whole')
  assert.match(refused[0]!.reason, /not a live API key/)
  assert.not.ok(out.lines.join('').includes('b'.repeat(43)), 'the key is never logged')
  await c.cp.close()
  const counted = out.records().find((r) => r.msg === 'requests refused like the one logged before' && r.type === 'upload')
  assert.equal([counted?.code, counted?.refused], [ErrorCodes.UNAUTHENTICATED, 4], 'the rest counted as the gateway closes')
}))

test.run()
