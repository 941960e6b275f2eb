/**
 * Upgrades and crashes lose nothing: a command that outlives its node agent (kill -9) goes on
 * running in the sandbox, and the client's output stream resumes from its last seq, byte-exact.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { microvmUnavailable } from '../../src/backends/microvm/index.js'
import { containerUnavailable } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type CreateSpec, type Sandbox } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, QUICK_LOSS, spawnNode, startTestControlPlane } from './harness.js'
import { mustBeUp, startUpWith, type UpProcess } from '../security/warren-up.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`resume tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip
// The guest kernel is kept between runs, shared with the backend's own tests (the spawned nodes inherit it).
process.env.WARREN_GUEST_DIR = '/var/tmp/warren-test-guest'
const vmWhy = microvmUnavailable(process.env.WARREN_GUEST_DIR)
if (vmWhy !== undefined) console.log(`microvm resume test skipped: ${vmWhy}`)
const vtest = vmWhy === undefined ? test : test.skip

/** A numbered line every 10 ms, `n` of them (busybox sh: no seq). */
function numbered (n: number): string {
  return `i=0; while [ $i -lt ${n} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`
}

/** Every line `line 0` .. `line n-1` once, in order: where it first goes wrong, else undefined. */
function firstWrong (text: string, n: number): string | undefined {
  const lines = text.split('\n')
  if (lines.pop() !== '') return 'the output does not end with a newline'
  for (let i = 0; i < n; i++) if (lines[i] !== `line ${i}`) return `line ${i} is ${JSON.stringify(lines[i])}`
  return lines.length === n ? undefined : `${lines.length} lines, not ${n}`
}

/** Reads a running command's output to its end, as it comes: what has come, and why it stopped if it failed. */
function follow (run: AsyncIterable<{ data: Uint8Array }>): { text: string, failed: unknown, done: Promise<void> } {
  const out: { text: string, failed: unknown, done: Promise<void> } = { text: '', failed: undefined, done: Promise.resolve() }
  out.done = (async () => {
    for await (const chunk of run) out.text += new TextDecoder().decode(chunk.data)
  })().catch((err: unknown) => { out.failed = err })
  return out
}

/** A port nothing listens on now. */
async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** `warren up` (control plane and its local node in one process) on `port` with `dataDir`, once it says it is up. */
async function startUp (dir: string, port: number): Promise<UpProcess> {
  return mustBeUp(await startUpWith(['--port', String(port), '--data-dir', join(dir, 'up')], join(dir, 'config.json'), 60_000))
}

/**
 * A command printing a numbered line every 10 ms for about 10 s; its node agent killed -9 mid-way
 * and started again on the same data dir. Every line must arrive once, in order, and the
 * command's trajectory step go on (`resumedAt`) instead of closing as lost.
 * @returns the sandbox, still running, for more checks
 */
async function killNodeMidCommand (defer: (fn: () => unknown) => void, nodeId: string, spec: CreateSpec, slowMs: number): Promise<Sandbox> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rs-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane(QUICK_LOSS)
  defer(() => cp.close())
  const first = await spawnNode(cp, nodeId, join(dir, 'node'))
  defer(() => first.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]), requestTimeoutMs: 90_000 })
  defer(() => client.close())
  const sb = await client.create(spec)
  defer(() => sb.kill().catch(() => {}))

  const n = 1000 // 10 s at one line per 10 ms (more, with the shell's own cost)
  const run = sb.spawn(['sh', '-c', numbered(n)])
  const out = follow(run)
  await waitFor(() => out.failed ?? out.text.includes('line 200\n'), slowMs, 'the command under way')
  await first.kill('SIGKILL')
  const cut = out.text.split('\n').length
  assert.ok(cut < n / 2, `the node was killed at line ${cut} of ${n}: mid-command`)
  await waitFor(() => sb.state === 'lost', 10_000, 'lost with its node')
  const second = await spawnNode(cp, nodeId, join(dir, 'node'))
  defer(() => second.kill())
  await waitFor(() => sb.state === 'ready', slowMs, 'ready again')
  await out.done
  assert.is(out.failed, undefined, 'the stream went on')
  assert.is(firstWrong(out.text, n), undefined, `cut at about line ${cut}`)
  assert.is((await run.wait()).exitCode, 0)
  const step = await waitFor(async () => (await sb.trajectory()).steps.find((st) => st.kind === 'exec' && st.execId === run.execId && st.endedAt !== undefined), 10_000, 'the step final')
  assert.equal(step.kind === 'exec' ? [step.exitCode, step.reason, typeof step.resumedAt] : undefined, [0, undefined, 'number'], 'taken up, not closed as lost')
  // The step records the whole output: what came before the kill from the old agent's journal.
  const recorded = step.kind === 'exec' && step.stdout?.data !== undefined ? new TextDecoder().decode(step.stdout.data) : ''
  assert.is(firstWrong(recorded, n), undefined, `the step's stdout (${recorded.length} bytes) is every line once`)
  return sb
}

ctest('kill -9 the node agent mid-command, restart it: every line arrives once, in order', timed(180_000, async (defer) => {
  await killNodeMidCommand(defer, 'rs1', { backend: 'container' }, 30_000)
}))

ctest('a sandbox paused mid-command, its node agent killed -9 and restarted: adopted paused, and at resume the command is taken up, every line once (its stdin refused, saying why)', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rsp-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane(QUICK_LOSS)
  defer(() => cp.close())
  const first = await spawnNode(cp, 'rsp1', join(dir, 'node'))
  defer(() => first.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill().catch(() => {}))

  const n = 1000
  const run = sb.spawn(['sh', '-c', numbered(n)], { openStdin: true })
  const out = follow(run)
  await waitFor(() => out.failed ?? out.text.includes('line 100\n'), 30_000, 'the command under way')
  await sb.pause()
  await first.kill('SIGKILL')
  await waitFor(() => sb.state === 'lost', 10_000, 'lost with its node')
  const second = await spawnNode(cp, 'rsp1', join(dir, 'node'))
  defer(() => second.kill())
  await waitFor(() => sb.state === 'paused', 20_000, 'adopted paused')
  await sb.resume()
  // Taken up, it streams on; what the old node held of its stdin is gone, and a write says so.
  const write = await run.write('more\n').then(() => 'written', (err: unknown) => err)
  assert.ok(isWarrenError(write, ErrorCodes.UNSUPPORTED) && write.details?.field === 'openStdin', String(write))
  await out.done
  assert.is(out.failed, undefined, 'the stream went on')
  assert.is(firstWrong(out.text, n), undefined)
  assert.is((await run.wait()).exitCode, 0)
  const step = await waitFor(async () => (await sb.trajectory()).steps.find((st) => st.kind === 'exec' && st.execId === run.execId && st.endedAt !== undefined), 10_000, 'the step final')
  assert.equal(step.kind === 'exec' ? [step.exitCode, step.reason, typeof step.resumedAt] : undefined, [0, undefined, 'number'], 'taken up at resume, not closed as lost')
}))

vtest('a microVM: kill -9 the node agent mid-command, restart it: the guest kept the command and its output, every line arrives once, in order', timed(240_000, async (defer) => {
  const sb = await killNodeMidCommand(defer, 'rsv1', { backend: 'microvm', limits: { cpus: 1, memoryMiB: 192, diskMiB: 32 } }, 60_000)
  assert.match((await sb.exec(['uname', '-r'])).stdout, /-cloud-amd64\n$/, 'the same guest')
}))

ctest('kill -9 the whole warren up mid-command, start it again on its data dir: the stream completes, every line once', timed(240_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rsu-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  const first = await startUp(dir, port)
  defer(() => first.kill())
  const client = await connect({ url: first.url, token: first.token })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container' })

  const n = 1000
  const run = sb.spawn(['sh', '-c', numbered(n)])
  const out = follow(run)
  await waitFor(() => out.failed ?? out.text.includes('line 200\n'), 30_000, 'the command under way')
  await first.kill('SIGKILL')
  const cut = out.text.split('\n').length
  assert.ok(cut < n / 2, `warren up was killed at line ${cut} of ${n}: mid-command`)
  const second = await startUp(dir, port)
  defer(() => second.kill())
  await out.done
  assert.is(out.failed, undefined, 'the stream went on')
  assert.is(firstWrong(out.text, n), undefined, `cut at about line ${cut}`)
  assert.is((await run.wait()).exitCode, 0)
  // The key, the sandbox and its trajectory outlived the restart too.
  const again = await client.attach(sb.id)
  assert.is((await again.info()).state, 'ready')
  const steps = (await again.trajectory()).steps
  assert.ok(steps.some((st) => st.kind === 'exec' && st.execId === run.execId), 'the command is in the trajectory')
  const step = await waitFor(async () => (await again.trajectory()).steps.find((st) => st.kind === 'exec' && st.execId === run.execId && st.endedAt !== undefined), 30_000, 'the step final')
  assert.equal(step.kind === 'exec' ? [step.exitCode, step.reason, typeof step.resumedAt] : undefined, [0, undefined, 'number'], 'taken up, not closed as lost')
  const recorded = step.kind === 'exec' && step.stdout?.data !== undefined ? new TextDecoder().decode(step.stdout.data) : ''
  assert.is(firstWrong(recorded, n), undefined, `the step's stdout (${recorded.length} bytes) is every line once`)
  await again.kill()
  await second.kill('SIGTERM')
}))

test.run()
