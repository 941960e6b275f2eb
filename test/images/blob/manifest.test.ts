import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError } from '../../../src/errors.js'
import { digestFile } from '../../../src/images/index.js'
import { createManifest, parseManifest, pushLayer, serializeManifest, storePaths } from '../../../src/images/blob/index.js'
import { timed } from '../../support/index.js'
import { seededBytes, sha256Hex, tempDir } from './helpers.js'

test('a manifest is deterministic and names every chunk by its sha256', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  const bytes = seededBytes(5 * 16384 + 1234, 1)
  const file = join(dir, 'layer.img')
  writeFileSync(file, bytes)
  const a = await createManifest(file, 16384)
  const b = await createManifest(file, 16384)
  assert.equal(a, b)
  assert.is(serializeManifest(a), serializeManifest(b))
  assert.is(a.digest, await digestFile(file))
  assert.is(a.size, bytes.length)
  assert.is(a.chunkBytes, 16384)
  assert.is(a.chunks.length, 6)
  a.chunks.forEach((d, i) => assert.is(d, `sha256:${sha256Hex(bytes.subarray(i * 16384, (i + 1) * 16384))}`, `chunk ${i}`))
  // A copy elsewhere gives the same manifest; another chunk size gives other chunks, same digest.
  const copy = join(dir, 'copy.img')
  writeFileSync(copy, bytes)
  assert.equal(await createManifest(copy, 16384), a)
  const c = await createManifest(file, 8192)
  assert.is(c.digest, a.digest)
  assert.is(c.chunks.length, 11)
  // One byte changed changes the digest and exactly one chunk.
  bytes[3 * 16384 + 7] = bytes[3 * 16384 + 7]! ^ 0xff
  writeFileSync(copy, bytes)
  const d = await createManifest(copy, 16384)
  assert.is.not(d.digest, a.digest)
  assert.equal(d.chunks.map((h, i) => h === a.chunks[i]), [true, true, true, false, true, true])
}))

test('edge sizes: empty file, exact multiple of the chunk size', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  writeFileSync(join(dir, 'empty'), '')
  const empty = await createManifest(join(dir, 'empty'), 4096)
  assert.equal(empty, { digest: `sha256:${sha256Hex(new Uint8Array(0))}`, size: 0, chunkBytes: 4096, chunks: [] })
  writeFileSync(join(dir, 'exact'), seededBytes(3 * 4096, 2))
  assert.is((await createManifest(join(dir, 'exact'), 4096)).chunks.length, 3)
  // The default chunk size applies when none is given.
  assert.is((await createManifest(join(dir, 'exact'))).chunkBytes, 1024 * 1024)
}))

test('bad chunk sizes are refused with INVALID_ARGUMENT', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  writeFileSync(join(dir, 'f'), 'x')
  for (const n of [0, 1000, 4097, 4096.5, 128 * 1024 * 1024]) {
    try {
      await createManifest(join(dir, 'f'), n)
      assert.unreachable(`chunkBytes ${n} accepted`)
    } catch (err) {
      assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'), `chunkBytes ${n}: ${String(err)}`)
    }
  }
}))

test('parseManifest round-trips and refuses inconsistent manifests', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  writeFileSync(join(dir, 'f'), seededBytes(10_000, 3))
  const m = await createManifest(join(dir, 'f'), 4096)
  assert.equal(parseManifest(serializeManifest(m), m.digest), m)
  const bad = [
    'not json',
    JSON.stringify({ ...m, chunks: m.chunks.slice(1) }),
    JSON.stringify({ ...m, size: -1 }),
    JSON.stringify({ ...m, chunkBytes: 1000 }),
    JSON.stringify({ ...m, digest: 'sha256:XYZ' }),
    JSON.stringify({ ...m, chunks: ['md5:00', ...m.chunks.slice(1)] })
  ]
  for (const text of bad) assert.throws(() => parseManifest(text), (err: unknown) => isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'))
  assert.throws(() => parseManifest(serializeManifest(m), `sha256:${'0'.repeat(64)}`), /describes/)
}))

test('pushLayer stores the layer under its digest with its manifest, idempotently', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  const root = join(dir, 'store')
  const bytes = seededBytes(70_000, 4)
  writeFileSync(join(dir, 'layer.img'), bytes)
  const first = await pushLayer(root, join(dir, 'layer.img'), { chunkBytes: 16384 })
  const hex = sha256Hex(bytes)
  assert.is(first.digest, `sha256:${hex}`)
  assert.is(first.existed, false)
  assert.equal(storePaths(root, first.digest), { blob: join(root, 'blobs', 'sha256', hex), manifest: join(root, 'manifests', 'sha256', `${hex}.json`) })
  assert.ok(readFileSync(first.blobPath).equals(bytes))
  assert.is(readFileSync(first.manifestPath, 'utf8'), serializeManifest(await createManifest(join(dir, 'layer.img'), 16384)))
  const mtime = statSync(first.blobPath).mtimeMs
  const again = await pushLayer(root, join(dir, 'layer.img'), { chunkBytes: 16384 })
  assert.is(again.existed, true)
  assert.equal(again.manifest, first.manifest)
  assert.is(statSync(first.blobPath).mtimeMs, mtime)
  // No temporary files are left behind.
  assert.equal(readdirSync(join(root, 'blobs', 'sha256')), [hex])
  assert.equal(readdirSync(join(root, 'manifests', 'sha256')), [`${hex}.json`])
  // Pushing with another chunk size keeps the blob and rewrites the manifest.
  const rechunked = await pushLayer(root, join(dir, 'layer.img'), { chunkBytes: 8192 })
  assert.is(rechunked.existed, false)
  assert.is(JSON.parse(readFileSync(first.manifestPath, 'utf8')).chunkBytes, 8192)
  assert.ok(existsSync(first.blobPath))
}))

test.run()
