/**
 * Fast creation: a VM restored from its shape's template (booted once, saved, restored with
 * `-incoming` and its sealed RAM mapped private) answers as itself: its own hostname, randomness
 * of its own, the host's time; VMs restored from one template share its pages (PSS well under
 * RSS) and none can write them (the RAM is sealed); a warm pool hands out a ready VM renamed;
 * kill and close leave nothing.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readlinkSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { GUEST_RAM_LINK, RAM_FD } from '../../../src/backends/microvm/index.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, memoryOf, mounted, newBackend, p50, registerLeftoverCheck, sh, templateDir, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 192, diskMiB: 16, pids: 64 }

vmTest('VMs restored from a template: each its own hostname, random pool and time; they share the template\'s pages; kill and close leave nothing', timed(150_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-restore-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir, { templates: true })
  defer(() => b.close())
  const first = await b.create({ id: 'rs-0', limits: LIMITS })
  assert.is(b.status().templates, 1, 'the first create made the shape\'s template')
  const dir = await templateDir()
  const times: number[] = []
  const handles = [first]
  for (let i = 1; i <= 3; i++) {
    const started = performance.now()
    handles.push(await b.create({ id: `rs-${i}`, limits: LIMITS }))
    times.push(performance.now() - started)
  }
  console.log(`microvm create from a saved template p50 (${b.status().accel}, n=3): ${p50(times).toFixed(0)} ms [${times.map((t) => t.toFixed(0)).join(', ')}]`)
  const seen = new Set<string>()
  for (const [i, h] of handles.entries()) {
    const [name, random, now] = (await sh(b, h, 'hostname; head -c 16 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; date +%s')).trim().split('\n')
    assert.is(name, `rs-${i}`)
    assert.not.ok(seen.has(random!), 'each VM draws its own random numbers')
    seen.add(random!)
    assert.ok(Math.abs(Number(now) - Date.now() / 1000) < 30, `guest time ${now!}`)
  }
  // What one writes, no other sees (the template's RAM is mapped private).
  await sh(b, handles[1]!, 'echo mine > /root/x')
  assert.is(await sh(b, handles[2]!, 'cat /root/x 2>/dev/null || echo none'), 'none\n')
  const mem = handles.map((h) => memoryOf(b.vm(h)!.pid))
  const pss = p50(mem.map((m) => m.pssKiB))
  const rss = p50(mem.map((m) => m.rssKiB))
  console.log(`microvm idle VM memory, restored (${b.status().accel}): PSS p50 ${(pss / 1024).toFixed(0)} MiB, RSS p50 ${(rss / 1024).toFixed(0)} MiB`)
  assert.ok(pss < rss, 'pages shared with the template')
  // What a QEMU its guest took over could do with the template's RAM it holds: write it.
  for (const h of handles.slice(1)) {
    const held = `/proc/${b.vm(h)!.pid}/fd/${RAM_FD}`
    assert.ok(readlinkSync(held).startsWith(GUEST_RAM_LINK), 'the template\'s RAM, as the node handed it over')
    const fd = openSync(held, 'r+')
    try {
      assert.throws(() => writeSync(fd, 'x', 0), /EPERM/, 'sealed against every write')
    } finally {
      closeSync(fd)
    }
  }

  for (const h of handles) {
    const vm = b.vm(h)!
    await b.kill(h)
    await assertGone(vm)
  }
  assert.equal(readdirSync(join(dataDir, 'journal')), [])
  await b.close()
  assert.not.ok(mounted(dir), 'nothing is mounted for templates')
  assert.not.ok(existsSync(dir))
}))

vmTest('the warm pool: a prewarmed VM is handed out renamed, at once; the pool fills again; close ends what it holds', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-pool-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir, { pool: { max: 1 } })
  defer(() => b.close())
  await b.prewarm({ limits: LIMITS }, 1)
  await waitFor(() => b.status().pooled === 1, 90_000, 'a pooled VM')
  const started = performance.now()
  const h = await b.create({ id: 'from-pool', limits: LIMITS })
  console.log(`microvm create from the warm pool (${b.status().accel}): ${(performance.now() - started).toFixed(0)} ms`)
  assert.is(await sh(b, h, 'hostname'), 'from-pool\n')
  assert.match(h.id, /^p/, 'the pooled VM, not a new one')
  await waitFor(() => b.status().pooled === 1, 90_000, 'the pool to fill again')
  const vm = b.vm(h)!
  await b.kill(h)
  await assertGone(vm)
  await b.close()
  assert.is(b.status().pooled, 0)
}))

registerLeftoverCheck()
test.run()
