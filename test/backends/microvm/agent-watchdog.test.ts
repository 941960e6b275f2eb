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
import { OverdueDefaults } from '../../../src/backends/container/exec.js'
import { MicrovmDefaults } from '../../../src/backends/microvm/index.js'
import { createAgentWatchdog } from '../../../src/backends/microvm/agent-watchdog.js'
import { runInVm } from '../../../src/backends/microvm/exec.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { lyingAgent } from '../container/fake-agent.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, vmTest } from './helpers.js'

const here = dirname(fileURLToPath(import.meta.url))
const LIMITS = { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 32 }

/** Short waits for a test; the defaults restored after it. */
function shortWaits (defer: (fn: () => unknown) => void, over: Partial<{ agentStallMs: number, agentPingMs: number, agentCheckEveryMs: number }>): void {
  const d = MicrovmDefaults as { agentStallMs: number, agentPingMs: number, agentCheckEveryMs: number }
  const saved = { agentStallMs: d.agentStallMs, agentPingMs: d.agentPingMs, agentCheckEveryMs: d.agentCheckEveryMs }
  Object.assign(d, over)
  defer(() => Object.assign(d, saved))
}

vmTest('an agent its guest stopped is given up: the command waiting on it fails, the VM ends saying why, nothing is left', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-watchdog-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // Built here: a static binary the guest runs (its own libc is the layer's, or none).
  const tool = join(dir, 'stop-init')
  const cc = spawnSync('musl-gcc', ['-static', '-O2', '-o', tool, join(here, '..', '..', '..', '..', 'test', 'backends', 'microvm', 'fixtures', 'stop-init.c')], { encoding: 'utf8' })
  assert.is(cc.status, 0, cc.stderr)
  // Short waits for the test; the defaults are 30 s and 60 s.
  shortWaits(defer, { agentStallMs: 2000, agentPingMs: 2000, agentCheckEveryMs: 500 })
  const b = await newBackend(join(dir, 'data'))
  defer(() => b.close())
  const h = await b.create({ id: 'stopped-init', limits: LIMITS })
  const vm = b.vm(h)!
  const ended: string[] = []
  b.onGone!(h, (why) => ended.push(why))
  await b.files.write(h, '/stop-init', readFileSync(tool), { mode: 0o755 })
  // The command stops the agent that runs it: it started, and its end can never be sent.
  // Held to its timeout by the host, then its silent agent given up: it ends as a command whose VM ended.
  const r = await b.exec(h, ['/stop-init'], { timeoutMs: 5000 })
  assert.equal([r.exitCode, r.message], [137, 'the VM ended during the command'])
  await waitFor(() => ended.length > 0, 30_000, 'the sandbox told it ended')
  assert.match(ended[0]!, /stopped answering/)
  await b.kill(h)
  await assertGone(vm)
}))

test('an agent that answers pings but never a command\'s start is given up once the stall and a ping\'s time have passed', timed(20_000, async (defer) => {
  // Found on this session's changes: such a guest kept an exec waiting for ever, since a ping was taken as life.
  shortWaits(defer, { agentStallMs: 300, agentPingMs: 300, agentCheckEveryMs: 50 })
  const agent = await lyingAgent(defer, 'exec', () => [])
  const watchdog = createAgentWatchdog(() => [{ agent, paused: false, running: async () => true }])
  defer(() => watchdog.stop())
  const exec = agent.exec(['true']).then(() => 'ran', (e: unknown) => e)
  await agent.ended
  assert.ok(isWarrenError(agent.endReason, ErrorCodes.PEER_UNRESPONSIVE), String(agent.endReason))
  assert.match(agent.endReason.message, /start unanswered/)
  assert.ok(isWarrenError(await exec, ErrorCodes.PEER_UNRESPONSIVE))
}))

test('a paused or stopped VM\'s agent is never given up, however long it leaves a start unanswered', timed(20_000, async (defer) => {
  shortWaits(defer, { agentStallMs: 100, agentPingMs: 100, agentCheckEveryMs: 20 })
  const agent = await lyingAgent(defer, 'exec', () => [])
  const watchdog = createAgentWatchdog(() => [{ agent, paused: false, running: async () => false }])
  defer(() => watchdog.stop())
  void agent.exec(['true']).catch(() => {})
  await waitFor(() => agent.oldestWaitMs() > 1000, 5000, 'a second of silence')
  await watchdog.check()
  assert.not.ok(agent.closed)
}))

test('a command past its timeout is held to it by the host: killed through its agent a grace after, then the agent given up while its VM runs', timed(20_000, async (defer) => {
  // Found on this session's changes: a guest whose agent sends `started` and never `exit` kept an exec with a 5 s timeout waiting for ever.
  const grace = OverdueDefaults.graceMs
  ;(OverdueDefaults as { graceMs: number }).graceMs = 200
  defer(() => { (OverdueDefaults as { graceMs: number }).graceMs = grace })
  const kills: number[] = []
  const agent = await lyingAgent(defer, 'exec', (req) => [{ t: 'started', id: req.id, pid: 7 }])
  // Kill requests are answered (a lie too: the command goes on).
  const target = { agent: { ...agent, kill: async (id: number) => { kills.push(id) } } as typeof agent, env: {}, oomSeen: 0, running: async () => true }
  const started = Date.now()
  const result = await runInVm(target as never, ['sleep', '1000'], { timeoutMs: 300 }).catch((e: unknown) => e)
  assert.is((result as { exitCode?: number }).exitCode, 137, JSON.stringify(result))
  assert.ok(isWarrenError(agent.endReason, ErrorCodes.PEER_UNRESPONSIVE), String(agent.endReason))
  assert.match(agent.endReason.message, /past its timeout/)
  assert.ok(Date.now() - started >= 300 + 200, 'not before its timeout and a grace')
}))

registerLeftoverCheck()
test.run()
