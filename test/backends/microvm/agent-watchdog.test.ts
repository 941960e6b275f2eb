/**
 * A guest whose root stops the agent (ptrace of PID 1, as an attack from inside a VM did): an
 * exec with a 5 s timeout never returned and file calls hung for a minute, because the agent
 * enforces timeouts and it no longer ran. Now the node pings an agent that leaves a request
 * unanswered, and ends the VM when it does not answer, saying why.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { MicrovmDefaults } from '../../../src/backends/microvm/index.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, sh, vmTest } from './helpers.js'

const here = dirname(fileURLToPath(import.meta.url))
const LIMITS = { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 32 }

vmTest('an agent its guest stopped is pinged, then given up: the waiting exec and file call fail, the VM ends saying why, nothing is left', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-watchdog-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // Built here: a static binary the guest runs (its own libc is the layer's, or none).
  const tool = join(dir, 'stop-init')
  const cc = spawnSync('musl-gcc', ['-static', '-O2', '-o', tool, join(here, '..', '..', '..', '..', 'test', 'backends', 'microvm', 'fixtures', 'stop-init.c')], { encoding: 'utf8' })
  assert.is(cc.status, 0, cc.stderr)
  // Short waits for the test; the defaults are 30 s and 60 s.
  const saved = { ...MicrovmDefaults }
  const d = MicrovmDefaults as { agentStallMs: number, agentPingMs: number, agentCheckEveryMs: number }
  Object.assign(d, { agentStallMs: 2000, agentPingMs: 2000, agentCheckEveryMs: 500 })
  defer(() => Object.assign(d, { agentStallMs: saved.agentStallMs, agentPingMs: saved.agentPingMs, agentCheckEveryMs: saved.agentCheckEveryMs }))
  const b = await newBackend(join(dir, 'data'))
  defer(() => b.close())
  const h = await b.create({ id: 'stopped-init', limits: LIMITS })
  const vm = b.vm(h)!
  const ended: string[] = []
  b.onGone!(h, (why) => ended.push(why))
  await b.files.write(h, '/stop-init', readFileSync(tool), { mode: 0o755 })
  assert.is(await sh(b, h, '(sleep 1; /stop-init) >/dev/null 2>&1 & echo started'), 'started\n')
  const [exec, stat] = await Promise.all([
    b.exec(h, ['sleep', '1'], { timeoutMs: 5000 }).then(() => 'answered', (e: unknown) => e),
    // Sent after the agent stopped: it waits, then fails with the rest.
    new Promise((resolve) => setTimeout(resolve, 2000)).then(async () => await b.files.stat(h, '/').then(() => 'answered', (e: unknown) => e))
  ])
  assert.is.not(exec, 'answered')
  assert.is.not(stat, 'answered')
  await waitFor(() => ended.length > 0, 30_000, 'the sandbox told it ended')
  assert.match(ended[0]!, /stopped answering/)
  await b.kill(h)
  await assertGone(vm)
}))

registerLeftoverCheck()
test.run()
