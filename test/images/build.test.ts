import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { buildLayerFromDir, digestFile, makeErofsImage, pinErofsBuildTime, run } from '../../src/images/index.js'
import { unmountUnder } from '../../src/images/build.js'
import { timed } from '../support/index.js'

const root = process.getuid?.() === 0
const rtest = root ? test : test.skip

test('the same tree builds to the same digest; a changed file changes it', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-layer-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'etc'), { recursive: true })
  writeFileSync(join(tree, 'etc', 'hello'), 'hello\n')
  symlinkSync('hello', join(tree, 'etc', 'link'))
  const a = await buildLayerFromDir(tree, join(dir, 'store'))
  const b = await buildLayerFromDir(tree, join(dir, 'store2'))
  assert.match(a.digest, /^sha256:[0-9a-f]{64}$/)
  assert.is(a.digest, b.digest)
  assert.is(await digestFile(a.path), a.digest)
  writeFileSync(join(tree, 'etc', 'hello'), 'changed\n')
  const c = await buildLayerFromDir(tree, join(dir, 'store'))
  assert.is.not(c.digest, a.digest)
}))

/** The superblock's build time (seconds, nanoseconds) and block count. */
function superblock (image: string): { time: bigint, nsec: number, blocks: number } {
  const b = readFileSync(image).subarray(1024, 1024 + 64)
  return { time: b.readBigUInt64LE(24), nsec: b.readUInt32LE(32), blocks: b.readUInt32LE(36) }
}

rtest('preserve keeps owners and each file\'s mtime, with the build time pinned: the kernel mounts it (checksum good), and the same tree gives the same bytes', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-layer-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'd'), { recursive: true })
  writeFileSync(join(tree, 'd', 'f'), 'f\n')
  chownSync(join(tree, 'd', 'f'), 1234, 5678)
  utimesSync(join(tree, 'd', 'f'), 1_600_000_000.25, 1_600_000_000.25)
  const a = join(dir, 'a.erofs')
  await makeErofsImage(tree, a, { preserve: true, excludeRegex: ['^d/skip$'] })
  const sb = superblock(a)
  assert.equal({ time: sb.time, nsec: sb.nsec }, { time: 0n, nsec: 0 })
  assert.ok(sb.blocks > 0, 'the block count is left alone')
  // Another stamp, pinned again: the build time is the only thing that varies between builds.
  await pinErofsBuildTime(a, 1_700_000_000)
  assert.is(superblock(a).time, 1_700_000_000n)
  await pinErofsBuildTime(a, 0)
  const b = join(dir, 'b.erofs')
  await makeErofsImage(tree, b, { preserve: true, excludeRegex: ['^d/skip$'] })
  assert.is(await digestFile(a), await digestFile(b))
  const mnt = join(dir, 'mnt')
  mkdirSync(mnt)
  await run('mount', ['-t', 'erofs', '-o', 'ro', a, mnt])
  defer(() => run('umount', [mnt]))
  const st = statSync(join(mnt, 'd', 'f'))
  assert.equal([st.uid, st.gid, st.mtimeMs], [1234, 5678, 1_600_000_000_250])
}))

rtest('a tree an interrupted debootstrap left mounts in is unmounted, deepest first, so it can be removed', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-unmount-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'proc'))
  await run('mount', ['-t', 'tmpfs', 'none', join(dir, 'proc')])
  mkdirSync(join(dir, 'proc', 'inner'))
  await run('mount', ['-t', 'tmpfs', 'none', join(dir, 'proc', 'inner')])
  defer(() => run('umount', ['-R', '-l', join(dir, 'proc')]).catch(() => {}))
  assert.throws(() => rmSync(dir, { recursive: true, force: true }), /EBUSY/, 'a mounted tree cannot be removed')
  await unmountUnder(dir)
  assert.not.ok(readFileSync('/proc/self/mountinfo', 'utf8').includes(dir), 'nothing is mounted below it')
  rmSync(dir, { recursive: true, force: true })
}))

test.run()
