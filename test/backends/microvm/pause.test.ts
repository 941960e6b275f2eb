/**
 * Pause and resume of a VM: the guest's commands frozen and its vCPUs stopped (QEMU idle, a
 * counter loop standing still), then going on; what a paused VM answers; kill of a paused VM.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { vmRunState } from '../../../src/backends/microvm/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, newBackend, qemuCpuTicks, registerLeftoverCheck, sh, text, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 192, diskMiB: 16, pids: 64 }

vmTest('pause stops a counter loop and QEMU\'s CPU; resume lets it go on; a paused VM refuses commands and files; kill of a paused VM leaves nothing', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-pause-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir)
  defer(() => b.close())
  const h = await b.create({ id: 'pause-a', limits: LIMITS })
  const vm = b.vm(h)!
  const count = async (): Promise<number> => Number(text(await b.files.read(h, '/tmp/c', { offset: 0, length: 32 })))
  await sh(b, h, '(i=0; while true; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; done) >/dev/null 2>&1 &')
  await waitFor(async () => await count().catch(() => 0) > 10, 20_000, 'the loop to count')

  await b.pause!(h)
  await b.pause!(h) // idempotent
  assert.is(await vmRunState(vm.qmpSocket), 'paused', 'the vCPUs are stopped')
  for (const call of [b.exec(h, ['true']), b.files.read(h, '/tmp/c', { offset: 0, length: 8 })]) {
    const refused = await call.catch((e: unknown) => e)
    assert.ok(isWarrenError(refused, ErrorCodes.SANDBOX_PAUSED), String(refused))
  }
  // A stopped VM's QEMU does nothing: its CPU time stands still (a running loop takes a whole vCPU).
  const before = qemuCpuTicks(vm)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  assert.ok(qemuCpuTicks(vm) - before <= 10, `QEMU used ${qemuCpuTicks(vm) - before} ticks while paused`)

  await b.resume!(h)
  await b.resume!(h) // idempotent
  assert.is(await vmRunState(vm.qmpSocket), 'running')
  assert.match(await sh(b, h, 'cat /sys/fs/cgroup/sandbox/cgroup.events'), /frozen 0/, 'the commands are thawed')
  const resumedAt = await count()
  await waitFor(async () => await count() > resumedAt + 10, 20_000, 'the loop to go on counting')
  // The guest's clock was given the host's time back.
  const guestNow = Number((await sh(b, h, 'date +%s')).trim())
  assert.ok(Math.abs(guestNow - Date.now() / 1000) < 30, `guest time ${guestNow}`)

  // Paused again, then killed: nothing is left (QEMU ends stopped as well as running).
  await b.pause!(h)
  await b.kill(h)
  await assertGone(vm)
  const after = await b.resume!(h).catch((e: unknown) => e)
  assert.ok(isWarrenError(after, ErrorCodes.SANDBOX_GONE), String(after))
}))

registerLeftoverCheck()
test.run()
