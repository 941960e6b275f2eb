/**
 * Cold boots, measured: each create starts QEMU and waits for the agent inside to answer. Five
 * one after another give the p50 the README quotes (TCG here); two at once must both come up.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { timed } from '../../support/index.js'
import { assertGone, newBackend, p50, registerLeftoverCheck, sh, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 192, diskMiB: 16, pids: 64 }

vmTest('cold boot to agent-ready, five times: each answers as itself, and is gone after kill', timed(200_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-boot-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir)
  defer(() => b.close())
  await b.guest()
  const times: number[] = []
  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    const h = await b.create({ id: `boot-${i}`, limits: LIMITS })
    times.push(performance.now() - started)
    assert.is((await sh(b, h, 'hostname')).trim(), `boot-${i}`)
    const vm = b.vm(h)!
    await b.kill(h)
    await assertGone(vm)
  }
  console.log(`microvm cold boot to agent-ready p50 (${b.status().accel}, n=5): ${p50(times).toFixed(0)} ms [${times.map((t) => t.toFixed(0)).join(', ')}]`)
}))

vmTest('two VMs boot at once, each with its own disk and hostname', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-boot-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir)
  defer(() => b.close())
  const [x, y] = await Promise.all([b.create({ id: 'pair-x', limits: LIMITS }), b.create({ id: 'pair-y', limits: LIMITS })])
  await sh(b, x!, 'echo x > /root/mine')
  assert.is((await sh(b, y!, 'hostname; cat /root/mine 2>&1 || true')).split('\n')[0], 'pair-y')
  assert.match(await sh(b, y!, 'ls /root'), /^$/, 'y does not see what x wrote')
  assert.is(b.status().live, 2)
  // A guest that powers itself off ends its QEMU; the backend says so, and kill cleans up after it.
  const vmY = b.vm(y!)!
  const gone = new Promise<string>((resolve) => b.onGone!(y!, resolve))
  const off = await b.exec(y!, ['poweroff', '-f'])
  assert.is(off.exitCode, 137, 'the command ended with its VM')
  assert.match(await gone, /VM ended/)
  await b.kill(y!)
  await assertGone(vmY)
  await b.close()
  assert.is(b.status().live, 0)
}))

registerLeftoverCheck()
test.run()
