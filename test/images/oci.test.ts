import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { unpackImage } from '../../src/images/index.js'
import { timed } from '../support/index.js'

/** Writes files (path → content) into a fresh directory and tars it. */
function layerTar (dir: string, name: string, files: Record<string, string>): string {
  const root = join(dir, `${name}.d`)
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), content)
  }
  const tar = join(dir, `${name}.tar`)
  execFileSync('tar', ['-cf', tar, '-C', root, '.'])
  return tar
}

const LOWER = { 'etc/a': 'a', 'etc/b': 'b', 'dir/x': 'x', 'dir/y': 'y', 'keep/k': 'k' }
const UPPER = { 'etc/.wh.a': '', 'dir/.wh..wh..opq': '', 'dir/z': 'z', 'new': 'n', 'keep/k': 'k2' }

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

test('a docker save archive with whiteouts and an opaque directory unpacks to the right tree', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-oci-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const archive = join(dir, 'archive')
  mkdirSync(archive)
  execFileSync('cp', [layerTar(dir, 'l1', LOWER), join(archive, 'l1.tar')])
  execFileSync('cp', [layerTar(dir, 'l2', UPPER), join(archive, 'l2.tar')])
  writeFileSync(join(archive, 'manifest.json'), JSON.stringify([{ Config: 'c.json', RepoTags: ['t:1'], Layers: ['l1.tar', 'l2.tar'] }]))
  execFileSync('tar', ['-cf', join(dir, 'image.tar'), '-C', archive, '.'])
  const root = join(dir, 'root')
  mkdirSync(root)
  await unpackImage(join(dir, 'image.tar'), root)
  assertApplied(root)
}))

test('an OCI image layout tar unpacks the same way', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-oci-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const layout = join(dir, 'layout')
  mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true })
  const put = (data: Buffer): string => {
    const hex = createHash('sha256').update(data).digest('hex')
    writeFileSync(join(layout, 'blobs', 'sha256', hex), data)
    return `sha256:${hex}`
  }
  const l1 = put(readFileSync(layerTar(dir, 'l1', LOWER)))
  const l2 = put(readFileSync(layerTar(dir, 'l2', UPPER)))
  const manifest = put(Buffer.from(JSON.stringify({ schemaVersion: 2, layers: [{ digest: l1 }, { digest: l2 }] })))
  writeFileSync(join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ digest: manifest }] }))
  writeFileSync(join(layout, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}')
  execFileSync('tar', ['-cf', join(dir, 'oci.tar'), '-C', layout, '.'])
  const root = join(dir, 'root')
  mkdirSync(root)
  await unpackImage(join(dir, 'oci.tar'), root)
  assertApplied(root)
}))

test('a layer that climbs out of its root is refused', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-oci-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'evil'), 'x')
  const archive = join(dir, 'archive')
  mkdirSync(archive)
  execFileSync('tar', ['-cf', join(archive, 'l.tar', ), '-C', dir, '--transform', 's,^evil,../../evil,', 'evil'])
  writeFileSync(join(archive, 'manifest.json'), JSON.stringify([{ Layers: ['l.tar'] }]))
  execFileSync('tar', ['-cf', join(dir, 'image.tar'), '-C', archive, '.'])
  const root = join(dir, 'root')
  mkdirSync(root)
  const err = await unpackImage(join(dir, 'image.tar'), root).catch((e: unknown) => e) as { code?: string }
  assert.is(err.code, 'WARREN_ERR_BAD_SPEC')
}))

test('a lower layer\'s symlinks cannot carry a later layer outside the tree: writes and whiteouts stay inside', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-oci-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // On the host: a directory a malicious image would like to write into, and a file it would like to delete.
  const victim = mkdtempSync(join(tmpdir(), 'warren-oci-victim-'))
  defer(() => rmSync(victim, { recursive: true, force: true }))
  writeFileSync(join(victim, 'precious'), 'keep me')
  const lower = join(dir, 'lower.d')
  mkdirSync(lower)
  symlinkSync(victim, join(lower, 'abs'))
  symlinkSync('../../../../../../../../..' + victim, join(lower, 'rel'))
  execFileSync('tar', ['-cf', join(dir, 'lower.tar'), '-C', lower, '.'])
  const upper = join(dir, 'upper.d')
  mkdirSync(join(upper, 'abs'), { recursive: true })
  mkdirSync(join(upper, 'rel'), { recursive: true })
  writeFileSync(join(upper, 'abs', 'pwned'), 'x')
  writeFileSync(join(upper, 'rel', 'pwned2'), 'x')
  writeFileSync(join(upper, 'abs', '.wh.precious'), '')
  // Files only, no directory entries: tar must walk through the lower layer's symlinks to place them.
  execFileSync('tar', ['-cf', join(dir, 'upper.tar'), '-C', upper, 'abs/pwned', 'rel/pwned2', 'abs/.wh.precious'])
  const archive = join(dir, 'archive')
  mkdirSync(archive)
  execFileSync('cp', [join(dir, 'lower.tar'), join(dir, 'upper.tar'), archive])
  writeFileSync(join(archive, 'manifest.json'), JSON.stringify([{ Layers: ['lower.tar', 'upper.tar'] }]))
  execFileSync('tar', ['-cf', join(dir, 'image.tar'), '-C', archive, '.'])
  const root = join(dir, 'root')
  mkdirSync(root)
  // Inside the tree the links point at paths that do not exist there: the layer may fail, never escape.
  await unpackImage(join(dir, 'image.tar'), root).catch(() => undefined)
  assert.not.ok(existsSync(join(victim, 'pwned')), 'nothing written through an absolute link')
  assert.not.ok(existsSync(join(victim, 'pwned2')), 'nothing written through a climbing link')
  assert.is(readFileSync(join(victim, 'precious'), 'utf8'), 'keep me', 'no whiteout through a link')
  assert.equal(readdirSync(root).filter((f) => f.startsWith('.warren-')), [], 'no tool left in the tree')
}))

test.run()
