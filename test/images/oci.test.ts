import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { unpackImage, unpackTar } from '../../src/images/index.js'
import { timed } from '../support/index.js'
import { dockerArchive, ociArchive, tarOf, type Member } from './archives.js'

const AMD64 = { os: 'linux', architecture: 'amd64' }
const files = (entries: Record<string, string>): Member[] => Object.entries(entries).map(([name, data]) => ({ name, data }))

const LOWER = files({ 'etc/a': 'a', 'etc/b': 'b', 'dir/x': 'x', 'dir/y': 'y', 'keep/k': 'k' })
// The opaque marker comes after dir/z: it hides the lower layers' files, never this layer's own.
const UPPER = files({ 'etc/.wh.a': '', 'dir/z': 'z', 'dir/.wh..wh..opq': '', new: 'n', 'keep/k': 'k2' })

function assertApplied (root: string): void {
  assert.not.ok(existsSync(join(root, 'etc/a')), 'whiteout deleted etc/a')
  assert.is(readFileSync(join(root, 'etc/b'), 'utf8'), 'b')
  assert.not.ok(existsSync(join(root, 'dir/x')), 'opaque dir hid dir/x')
  assert.not.ok(existsSync(join(root, 'dir/y')), 'opaque dir hid dir/y')
  assert.is(readFileSync(join(root, 'dir/z'), 'utf8'), 'z')
  assert.is(readFileSync(join(root, 'new'), 'utf8'), 'n')
  assert.is(readFileSync(join(root, 'keep/k'), 'utf8'), 'k2', 'upper file replaces lower')
  assert.not.ok(existsSync(join(root, 'etc/.wh.a')), 'markers are not in the tree')
  assert.not.ok(existsSync(join(root, 'dir/.wh..wh..opq')))
}

/** A private directory with the archive in it; the tree goes to `root` inside it. */
function scratch (defer: (fn: () => unknown) => void): { dir: string, root: string, write: (b: Buffer) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'warren-oci-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return { dir, root: join(dir, 'root'), write: (b) => { const f = join(dir, 'archive.tar'); writeFileSync(f, b); return f } }
}

test('a docker save archive with whiteouts and an opaque directory unpacks to the right tree', timed(30_000, async (defer) => {
  const { root, write } = scratch(defer)
  const archive = await dockerArchive([{ platform: AMD64, layers: [await tarOf(LOWER), await tarOf(UPPER)] }])
  assert.equal(await unpackImage(write(archive), root), { platform: 'linux/amd64', layers: 2 })
  assertApplied(root)
  assert.equal(readdirSync(join(root, '..')).sort(), ['archive.tar', 'root'], 'the work directory went')
}))

test('an OCI image layout tar, gzipped layers, unpacks the same way', timed(30_000, async (defer) => {
  const { root, write } = scratch(defer)
  const archive = await ociArchive([{ platform: AMD64, layers: [await tarOf(LOWER), await tarOf(UPPER)], gzip: true }])
  await unpackImage(write(archive), root)
  assertApplied(root)
}))

test('a layer that climbs out of its root is refused, naming the flag it came from', timed(30_000, async (defer) => {
  const { root, write } = scratch(defer)
  const err = await unpackTar(write(await tarOf([{ name: '../../evil', data: 'x' }])), root, { field: 'from-tar' }).catch((e: unknown) => e) as { code?: string, details?: { field?: string } }
  assert.is(err.code, 'WARREN_ERR_BAD_SPEC')
  assert.is(err.details?.field, 'from-tar')
}))

test('a lower layer\'s symlinks cannot carry a later layer outside the tree: writes and whiteouts stay inside', timed(30_000, async (defer) => {
  const { root, write } = scratch(defer)
  // On the host: a directory a malicious image would like to write into, and a file it would like to delete.
  const victim = mkdtempSync(join(tmpdir(), 'warren-oci-victim-'))
  defer(() => rmSync(victim, { recursive: true, force: true }))
  writeFileSync(join(victim, 'precious'), 'keep me')
  const lower = await tarOf([
    { name: 'abs', type: 'symlink', linkname: victim },
    { name: 'rel', type: 'symlink', linkname: '../../../../../../../../..' + victim }
  ])
  // Files only, no directory entries: the writer must walk through the lower layer's symlinks to place them.
  const upper = await tarOf(files({ 'abs/pwned': 'x', 'rel/pwned2': 'x', 'abs/.wh.precious': '' }))
  await unpackImage(write(await dockerArchive([{ platform: AMD64, layers: [lower, upper] }])), root)
  assert.equal(readdirSync(victim), ['precious'], 'nothing written through a link')
  assert.is(readFileSync(join(victim, 'precious'), 'utf8'), 'keep me', 'no whiteout through a link')
  // Inside the image the links lead where they would in a container: to the image's own paths.
  assert.is(readFileSync(join(root, victim, 'pwned'), 'utf8'), 'x')
  assert.is(readFileSync(join(root, victim, 'pwned2'), 'utf8'), 'x')
}))

test('a corrupt gzip is refused as the archive\'s fault, not a crash', timed(30_000, async (defer) => {
  const { root, write } = scratch(defer)
  const err = await unpackTar(write(Buffer.from([0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8])), root, { field: 'from-tar' }).catch((e: unknown) => e) as { code?: string }
  assert.is(err.code, 'WARREN_ERR_BAD_SPEC')
}))

test('a tree is only built where no one else can reach it', timed(30_000, async (defer) => {
  const { dir, write } = scratch(defer)
  const archive = write(await tarOf(files({ f: 'x' })))
  const err = await unpackTar(archive, join(tmpdir(), `warren-oci-open-${process.pid}`), {}).catch((e: unknown) => e) as { code?: string }
  assert.is(err.code, 'WARREN_ERR_INTERNAL', 'tmpdir is 1777: refused')
  await unpackTar(archive, join(dir, 'root'))
  assert.is(readFileSync(join(dir, 'root', 'f'), 'utf8'), 'x')
}))

test.run()
