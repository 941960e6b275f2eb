import { lstat, readdir, readFile, readlink } from 'node:fs/promises'
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { makeErofsImage, run } from '../../../src/images/index.js'
import { readMountinfo } from '../../../src/images/fuse/mount.js'
import { timed } from '../../support/index.js'
import { mountErofs, mountMemory, rootTest, seededBytes, sha256, skipReason, tempDir, testMounts } from './helpers.js'

/** Every path under `root` (relative, sorted) with what it is: a file's sha256, a link's target, or `dir`. */
async function describeTree (root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  const walk = async (rel: string): Promise<void> => {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const path = rel === '' ? name : `${rel}/${name}`
      const full = join(root, path)
      const s = await lstat(full)
      if (s.isSymbolicLink()) out.set(path, `link:${await readlink(full)}`)
      else if (s.isDirectory()) {
        out.set(path, `dir:${(s.mode & 0o7777).toString(8)}`)
        await walk(path)
      } else out.set(path, `file:${(s.mode & 0o7777).toString(8)}:${s.size}:${sha256(await readFile(full))}`)
    }
  }
  await walk('')
  return out
}

rootTest('an EROFS image served through the FUSE mount mounts, and every file of it is byte-identical to its source', timed(60_000, async (defer) => {
  const dir = tempDir(defer)
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'etc/ssl'), { recursive: true })
  mkdirSync(join(tree, 'usr/lib/deep/er/still'), { recursive: true })
  mkdirSync(join(tree, 'empty-dir'))
  writeFileSync(join(tree, 'etc/hostname'), 'sandbox\n')
  writeFileSync(join(tree, 'etc/ssl/cert.pem'), seededBytes(1_777, 1))
  writeFileSync(join(tree, 'usr/lib/page'), seededBytes(4096, 2))
  writeFileSync(join(tree, 'usr/lib/page+1'), seededBytes(4097, 3))
  writeFileSync(join(tree, 'usr/lib/deep/er/still/big.bin'), seededBytes(3 * 1024 * 1024 + 5, 4))
  writeFileSync(join(tree, 'usr/lib/zeros'), Buffer.alloc(200_000))
  writeFileSync(join(tree, 'empty'), '')
  writeFileSync(join(tree, 'script.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 })
  symlinkSync('etc/hostname', join(tree, 'link'))
  symlinkSync('/nowhere/at/all', join(tree, 'dangling'))
  for (let i = 0; i < 150; i++) writeFileSync(join(tree, 'usr/lib', `small-${i}`), seededBytes(i * 37, 100 + i))

  const image = join(dir, 'layer.erofs')
  await makeErofsImage(tree, image)
  const bytes = readFileSync(image) // read before anything is mounted: no sync call touches a mount
  const fs = await mountMemory(defer, dir, new Map([['layer.erofs', bytes]]))

  const root = join(dir, 'root')
  mkdirSync(root)
  const how = await mountErofs(join(fs.mountpoint, 'layer.erofs'), root)
  defer(() => run('umount', [root]))
  console.log(`  EROFS on the FUSE file: ${how} mount`)
  const m = readMountinfo().find((e) => e.mountPoint === root)
  assert.is(m?.fsType, 'erofs')
  if (how === 'file-backed') assert.is(m?.source, join(fs.mountpoint, 'layer.erofs'))

  const expected = await describeTree(tree)
  const got = await describeTree(root)
  assert.equal([...got.keys()], [...expected.keys()], 'the same paths')
  for (const [path, what] of expected) {
    // mkfs.erofs --all-root keeps modes; compare contents and links exactly, modes as built.
    assert.is(got.get(path), what, path)
  }
  const s = fs.stats()
  assert.ok(s.reads > 0 && s.readErrors === 0, `the bytes came through FUSE: ${JSON.stringify(s)}`)
}))

if (skipReason === undefined) {
  test('no mount of these tests is left', () => {
    assert.equal(testMounts(), [])
  })
}

test.run()
