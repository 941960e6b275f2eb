/**
 * The writable layer is a tmpfs in guest memory. Found by filling it as a tenant would: with the
 * default limits (1 GiB of disk, 512 MiB of memory) one `head -c 700M /dev/zero > /big` took the
 * guest's last page, the guest panicked and the sandbox was lost. The layer is now capped below
 * the guest's memory: past the cap is ENOSPC, and the VM lives on. Then, restored from a
 * template, the same VM was ended by the host: its QEMU's cgroup paid for the template's pages
 * its guest first touched beside its own copies (the template's holes are now filled once, by
 * the node, before it is sealed).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { MicrovmBackend } from '../../../src/backends/microvm/index.js'
import type { SandboxHandle } from '../../../src/backends/types.js'
import { timed } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, run, sh, vmTest } from './helpers.js'

// Memory above what QEMU is given beside it (160 MiB, and 64 of TCG cache): twice the guest then overflows the cgroup.
const LIMITS = { cpus: 1, memoryMiB: 384, diskMiB: 1024, pids: 64 }

/** Fills the writable layer of `h`, then runs a memory hog beside it: ENOSPC, then oom, and the VM answers. */
async function fillThenHog (b: MicrovmBackend, h: SandboxHandle): Promise<void> {
  const [totalKiB, sizeMiB] = (await sh(b, h, 'grep MemTotal /proc/meminfo | tr -s " " | cut -d" " -f2; df -m / | tail -1 | tr -s " " | cut -d" " -f2')).trim().split('\n').map(Number)
  assert.ok(sizeMiB! < totalKiB! / 1024, `the layer (${sizeMiB} MiB) is below the guest's memory (${totalKiB} KiB)`)
  assert.ok(sizeMiB! > 32, `the layer still holds something (${sizeMiB} MiB)`)
  const fill = await run(b, h, ['sh', '-c', 'dd if=/dev/zero of=/big bs=1M count=600 2>&1; echo dd=$?'], { timeoutMs: 120_000 })
  assert.match(fill.stdout, /No space left on device/)
  assert.match(fill.stdout, /dd=1/)
  // With the layer full, memory is what the reserve left: a hog meets the OOM killer, not the guest's end.
  const hog = await b.exec(h, ['sh', '-c', 'x=aaaaaaaa; while true; do x="$x$x"; done'], { timeoutMs: 60_000 })
  assert.is(hog.reason, 'oom', JSON.stringify(hog))
  assert.is((await sh(b, h, 'rm /big; echo alive')).trim(), 'alive')
}

vmTest('a writable layer asked larger than the guest\'s memory, cold-booted and restored from a template: filling it is ENOSPC, a memory hog beside it is oom, the VM lives', timed(300_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-disk-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir, { templates: true })
  defer(() => b.close())
  for (const id of ['disk-first', 'disk-restored']) {
    const h = await b.create({ id, limits: LIMITS })
    const vm = b.vm(h)!
    defer(async () => { await b.kill(h).catch(() => {}) })
    // The restored VM's QEMU maps the template's RAM: every page its guest fills, the template's
    // holes among them, must fit its cgroup (the host's OOM killer ended it when they did not).
    await fillThenHog(b, h)
    await b.kill(h)
    await assertGone(vm)
  }
  assert.is(b.status().templates, 1, 'the second VM was restored from the first one\'s template')
}))

registerLeftoverCheck()
test.run()
