/**
 * Snapshots of a VM: its writes cut into an EROFS layer (modes, owners, mtimes, a deleted file,
 * a directory made again, a symlink, a hardlink pair, an empty directory, a file of random
 * bytes), stacked on its layers in a new VM they are all there again, and in a container too (the
 * same layer format, without the module disk's empty mount point); a flattened snapshot stands alone; a snapshot of a paused VM leaves it paused.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createCgroupProvider, createContainerBackend } from '../../../src/backends/container/index.js'
import { vmRunState } from '../../../src/backends/microvm/index.js'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { buildLayerFromDir } from '../../../src/images/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, sh, text, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 256, diskMiB: 64, pids: 64 }

const WRITES = [
  'mkdir -p /data && printf hello > /data/f && chmod 640 /data/f && chown 1234:5678 /data/f && touch -d "2021-02-03 04:05:06" /data/f',
  'rm /base/gone',
  'rm -rf /base/olddir && mkdir /base/olddir && echo new > /base/olddir/c',
  'ln -s f /data/link && echo linked > /data/h1 && ln /data/h1 /data/h2 && mkdir /data/empty',
  'dd if=/dev/urandom of=/data/big bs=1M count=8 2>/dev/null && sha256sum /data/big > /data/big.sha'
].join(' && ')

/** Every path under /base and /data with its type, mode, owner and mtime (and link count and size for files), sorted. */
const TREE = 'find /base /data | sort | while read p; do if [ -d "$p" ]; then stat -c "%n %F %a %u:%g %Y" "$p"; else stat -c "%n %F %a %u:%g %Y %h %s" "$p"; fi; done'

/** A base layer of our own: /base/keep, /base/gone, /base/olddir/{a,b}. */
async function baseLayer (layersDir: string): Promise<string> {
  const tree = mkdtempSync(join(tmpdir(), 'warren-vmbase-'))
  try {
    mkdirSync(join(tree, 'base', 'olddir'), { recursive: true })
    writeFileSync(join(tree, 'base', 'keep'), 'kept\n')
    writeFileSync(join(tree, 'base', 'gone'), 'gone\n')
    writeFileSync(join(tree, 'base', 'olddir', 'a'), 'a\n')
    writeFileSync(join(tree, 'base', 'olddir', 'b'), 'b\n')
    return (await buildLayerFromDir(tree, layersDir)).digest
  } finally {
    rmSync(tree, { recursive: true, force: true })
  }
}

vmTest('a VM\'s writes become a layer: a new VM on it sees them all (deletes and a remade directory too), so does a container; flatten stands alone; a paused VM stays paused', timed(200_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-vmsnap-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const layersDir = join(dataDir, 'layers')
  const b = await newBackend(dataDir, { layersDir })
  defer(() => b.close())
  const base = await baseLayer(layersDir)
  const src = await b.create({ id: 'snap-src', limits: LIMITS, layers: ['busybox', base] })
  await sh(b, src, WRITES)
  const tree = await sh(b, src, TREE)
  assert.match(tree, /\/data\/f regular file 640 1234:5678 1612325106 1 5/)

  const started = performance.now()
  const layer = await b.snapshot!(src)
  console.log(`microvm snapshot of ~8 MiB of writes (${b.status().accel}): ${(performance.now() - started).toFixed(0)} ms, layer ${layer.bytes} bytes`)
  assert.match(layer.digest, /^sha256:[0-9a-f]{64}$/)
  assert.is(await sh(b, src, 'cat /data/f'), 'hello', 'the source runs on')

  // The same writes, stacked on the same layers, in a new VM.
  const copy = await b.create({ id: 'snap-copy', limits: LIMITS, layers: ['busybox', base, layer.digest] })
  assert.is(await sh(b, copy, TREE), tree)
  assert.is(await sh(b, copy, 'cat /base/keep; ls /base/olddir; cat /data/link; echo; cat /data/h2'), 'kept\nc\nhello\nlinked\n')
  await sh(b, copy, 'cd /data && sha256sum -c big.sha')

  // And in a container: the one layer format.
  if (containerUnavailable() === undefined) {
    const c = createContainerBackend({ dataDir: join(dataDir, 'container'), layersDir, runDir: join('/run/warren/test', `vmsnap-${process.pid}`), cgroups: createCgroupProvider(`warren-vmsnap-${process.pid}`), pool: { max: 0 } })
    defer(() => c.close())
    const ch = await c.create({ layers: ['busybox', base, layer.digest] })
    let out = ''
    const r = await c.exec(ch, ['sh', '-c', TREE], { onStdout: (x) => { out += text(x) } })
    assert.is(r.exitCode, 0)
    assert.is(out, tree, 'a container on the VM\'s snapshot sees the same tree')
    let mods = ''
    await c.exec(ch, ['sh', '-c', 'ls -d /lib/modules 2>/dev/null || echo none'], { onStdout: (x) => { mods += text(x) } })
    assert.is(mods, 'none\n', 'the module disk\'s empty mount point is not in the layer')
    await c.kill(ch)
  }

  // Flattened: the whole tree in one layer, standing alone (no busybox, no base below it).
  const flat = await b.snapshot!(copy, { flatten: true })
  const alone = await b.create({ id: 'snap-flat', limits: LIMITS, layers: [flat.digest] })
  assert.is(await sh(b, alone, TREE), tree)
  assert.is(await sh(b, alone, 'ls /proc/self >/dev/null && echo proc is mounted again'), 'proc is mounted again\n')

  // A sparse file past the VM's disk (64 MiB) is refused, naming it, before it is streamed out in zeros.
  await sh(b, alone, 'truncate -s 1G /sparse')
  const sparse = await b.snapshot!(alone).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(sparse, ErrorCodes.QUOTA), String(sparse))
  assert.is(sparse.details?.field, 'limits.diskMiB')
  await sh(b, alone, 'rm /sparse')

  // A paused VM is cut as it stands and left paused.
  await sh(b, alone, 'echo while-paused > /data/p')
  await b.pause!(alone)
  const pausedCut = await b.snapshot!(alone)
  assert.is(await vmRunState(b.vm(alone)!.qmpSocket), 'paused')
  await b.resume!(alone)
  const again = await b.create({ id: 'snap-paused', limits: LIMITS, layers: [flat.digest, pausedCut.digest] })
  assert.is(await sh(b, again, 'cat /data/p'), 'while-paused\n')

  for (const h of [src, copy, alone, again]) {
    const vm = b.vm(h)!
    await b.kill(h)
    await assertGone(vm)
  }
}))

registerLeftoverCheck()
test.run()
