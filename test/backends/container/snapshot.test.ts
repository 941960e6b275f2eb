import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { ContainerBackend } from '../../../src/backends/container/index.js'
import type { SandboxHandle, SnapshotLayer } from '../../../src/backends/types.js'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { buildLayerFromDir, digestFile } from '../../../src/images/index.js'
import { timed, type Cleanup } from '../../support/index.js'
import { checkNothingLeft, freezerFile, makeBackend, newDataDir, run, sh } from './backend-helpers.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container snapshot tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

/**
 * What the sandbox writes over its layers: a file with its own mode, owner and mtime, a file of
 * the base deleted, a directory of the base removed and made again, a symlink, a hardlink pair,
 * an empty directory, and 100 MiB of random bytes.
 */
const WRITES = [
  'mkdir -p /data && printf hello > /data/f && chmod 640 /data/f && chown 1234:5678 /data/f && touch -d "2021-02-03 04:05:06" /data/f',
  'rm /base/gone',
  'rm -rf /base/olddir && mkdir /base/olddir && echo new > /base/olddir/c',
  'ln -s f /data/link && echo linked > /data/h1 && ln /data/h1 /data/h2 && mkdir /data/empty',
  'dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null && sha256sum /data/big > /data/big.sha'
].join(' && ')

/** Every path under /base and /data with its type, mode, owner and mtime (and link count for files), sorted. */
const TREE = 'find /base /data | sort | while read p; do if [ -d "$p" ]; then stat -c "%n %F %a %u:%g %Y" "$p"; else stat -c "%n %F %a %u:%g %Y %h %s" "$p"; fi; done'

const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** A base layer of our own (beside busybox): /base/keep, /base/gone, /base/olddir/{a,b}, built into the backend's store. */
async function baseLayer (dataDir: string): Promise<string> {
  const tree = mkdtempSync(join(tmpdir(), 'warren-base-'))
  try {
    mkdirSync(join(tree, 'base', 'olddir'), { recursive: true })
    writeFileSync(join(tree, 'base', 'keep'), 'kept\n')
    writeFileSync(join(tree, 'base', 'gone'), 'gone\n')
    writeFileSync(join(tree, 'base', 'olddir', 'a'), 'a\n')
    writeFileSync(join(tree, 'base', 'olddir', 'b'), 'b\n')
    return (await buildLayerFromDir(tree, join(dataDir, 'layers'))).digest
  } finally {
    rmSync(tree, { recursive: true, force: true })
  }
}

interface Fixture { b: ContainerBackend, base: string[], h: SandboxHandle, tree: string }

/** A backend, a sandbox on [busybox, base] that made WRITES, and its tree listing. */
async function fixture (defer: Cleanup['defer']): Promise<Fixture> {
  const dataDir = newDataDir()
  const b = makeBackend(defer, { dataDir })
  const base = ['busybox', await baseLayer(dataDir)]
  const h = await b.create({ layers: base, limits: { cpus: 0, memoryMiB: 0, diskMiB: 256, pids: 0 } })
  await sh(b, h, WRITES)
  return { b, base, h, tree: await sh(b, h, TREE) }
}

/** Checks a sandbox made from snapshot layers sees what the original wrote. */
async function checkWrites (b: ContainerBackend, h: SandboxHandle): Promise<void> {
  assert.is(await sh(b, h, 'cat /data/f; stat -c " %a %u %g %Y" /data/f'), `hello 640 1234 5678 ${Date.UTC(2021, 1, 3, 4, 5, 6) / 1000}\n`)
  assert.is(await sh(b, h, 'cat /base/keep; [ ! -e /base/gone ] && echo gone'), 'kept\ngone\n')
  assert.is(await sh(b, h, 'ls -A /base/olddir'), 'c\n', 'the old entries are hidden by the opaque directory')
  assert.is(await sh(b, h, 'readlink /data/link; cat /data/link'), 'f\nhello')
  assert.is(await sh(b, h, 'stat -c "%i %h" /data/h1 /data/h2 | uniq | wc -l; stat -c %h /data/h1'), '1\n2\n', 'one inode, two names')
  assert.is(await sh(b, h, '[ -d /data/empty ] && ls -A /data/empty | wc -l'), '0\n')
  assert.is(await sh(b, h, 'sha256sum -c /data/big.sha >/dev/null && echo same'), 'same\n')
}

ctest('a snapshot stacked on the sandbox\'s layers gives back its tree; the same upper gives the same digest', timed(90_000, async (defer) => {
  const { b, base, h, tree } = await fixture(defer)
  const times: number[] = []
  let layer: SnapshotLayer | undefined
  for (let i = 0; i < 5; i++) {
    const t = performance.now()
    const cut = await b.snapshot!(h)
    times.push(performance.now() - t)
    if (layer !== undefined) assert.is(cut.digest, layer.digest, 'a snapshot of an unchanged sandbox is byte for byte the same')
    layer = cut
  }
  assert.ok(layer !== undefined)
  assert.match(layer.digest, /^sha256:[0-9a-f]{64}$/)
  assert.is(layer.path, join(layer.path, '..', `${layer.digest.slice(7)}.erofs`))
  assert.is(await digestFile(layer.path), layer.digest)
  assert.is(statSync(layer.path).size, layer.bytes)
  console.log(`snapshot of a sandbox that wrote 100 MiB: p50 ${p50(times).toFixed(0)} ms (5 runs), layer ${layer.bytes} bytes`)
  assert.is(await sh(b, h, 'echo still running'), 'still running\n', 'the sandbox runs on after a snapshot')

  const copy = await b.create({ layers: [...base, layer.digest] })
  await checkWrites(b, copy)
  assert.is(await sh(b, copy, TREE), tree, 'the same tree: names, types, modes, owners, mtimes, link counts, sizes')
}))

ctest('a second snapshot over the first stacks: [base, s1, s2]', timed(90_000, async (defer) => {
  const { b, base, h } = await fixture(defer)
  const s1 = await b.snapshot!(h)
  const next = await b.create({ layers: [...base, s1.digest] })
  await sh(b, next, 'echo second > /data/second && rm /data/f && rm -rf /base/olddir && mkdir /base/olddir && touch /base/olddir/d')
  const s2 = await b.snapshot!(next)
  assert.ok(s2.bytes < s1.bytes / 10, `the second layer holds only the second writes (${s2.bytes} bytes)`)
  const top = await b.create({ layers: [...base, s1.digest, s2.digest] })
  assert.is(await sh(b, top, 'cat /data/second; [ ! -e /data/f ] && echo f-gone; ls -A /base/olddir; readlink /data/link'), 'second\nf-gone\nd\nf\n')
  assert.is(await sh(b, top, 'sha256sum -c /data/big.sha >/dev/null && echo same'), 'same\n', 'what s1 holds shows through s2')
}))

ctest('a flattened snapshot alone, as the only layer, gives the same tree', timed(90_000, async (defer) => {
  const { b, h, tree } = await fixture(defer)
  const flat = await b.snapshot!(h, { flatten: true })
  const alone = await b.create({ layers: [flat.digest] })
  await checkWrites(b, alone)
  assert.is(await sh(b, alone, TREE), tree)
  const everything = 'find / -xdev | grep -v "^/proc\\|^/sys\\|^/dev" | sort'
  assert.is(await sh(b, alone, everything), await sh(b, h, everything), 'every path outside the other mounts')
  assert.is(await sh(b, alone, 'ls /bin/sh >/dev/null && echo busybox'), 'busybox\n', 'the base layers are in it')
}))

ctest('a snapshot of a paused sandbox leaves it paused', timed(60_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({})
  await sh(b, h, 'echo paused > /note')
  await b.pause!(h)
  const layer = await b.snapshot!(h)
  assert.is(freezerFile(h.id), 'FROZEN')
  const err = await b.exec(h, ['true']).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.SANDBOX_PAUSED), String(err))
  await b.resume!(h)
  const copy = await b.create({ layers: ['busybox', layer.digest] })
  assert.is(await sh(b, copy, 'cat /note'), 'paused\n')
  // A running sandbox's snapshot thaws it again.
  await b.snapshot!(copy)
  assert.is(freezerFile(copy.id), 'THAWED')
  assert.is((await run(b, copy, 'true')).exitCode, 0)
}))

ctest('a sandbox whose upper is on the host disk (diskMiB 0) snapshots the same way', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({ limits: { cpus: 0, memoryMiB: 0, diskMiB: 0, pids: 0 } })
  await sh(b, h, 'mkdir -p /d/e && echo on-disk > /d/f && rm /bin/ls')
  const layer = await b.snapshot!(h)
  const copy = await b.create({ layers: ['busybox', layer.digest] })
  assert.is(await sh(b, copy, 'cat /d/f; [ -d /d/e ] && [ ! -e /bin/ls ] && echo ok'), 'on-disk\nok\n')
}))

ctest('a sparse file larger than the sandbox\'s disk is refused at the snapshot (QUOTA naming limits.diskMiB), not written out in zeros; one within it goes', timed(60_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({ limits: { cpus: 0, memoryMiB: 0, diskMiB: 64, pids: 0 } })
  // 4 GiB of hole in a 64 MiB disk: nothing is written, and mkfs.erofs would write every byte.
  await sh(b, h, 'truncate -s 4G /sparse && echo small > /f')
  const err = await b.snapshot!(h).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.QUOTA), String(err))
  assert.is(err.details?.field, 'limits.diskMiB')
  assert.match(err.message, /sparse files count whole/)
  await sh(b, h, 'rm /sparse && truncate -s 16M /sparse')
  const layer = await b.snapshot!(h)
  const copy = await b.create({ layers: ['busybox', layer.digest] })
  assert.is(await sh(b, copy, 'cat /f; stat -c %s /sparse'), 'small\n16777216\n')
}))

ctest('a file whose name is not UTF-8 is snapshotted like any other (was: INTERNAL naming a host path)', timed(60_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({ limits: { cpus: 0, memoryMiB: 0, diskMiB: 64, pids: 0 } })
  await sh(b, h, 'mkdir -p /n && echo x > "/n/$(printf \'b\\377d\')"')
  const layer = await b.snapshot!(h)
  const copy = await b.create({ layers: ['busybox', layer.digest] })
  assert.is(await sh(b, copy, 'cat /n/* && for f in /n/*; do printf %s "$f" | od -An -tx1; done'), 'x\n 2f 6e 2f 62 ff 64\n')
}))

ctest('a snapshot of a killed sandbox is WARREN_ERR_SANDBOX_GONE', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({})
  await b.kill(h)
  const err = await b.snapshot!(h).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.SANDBOX_GONE), String(err))
}))

ctest('nothing is left: no sandbox groups, run directories or staging copies', () => {
  checkNothingLeft()
})

test.run()
