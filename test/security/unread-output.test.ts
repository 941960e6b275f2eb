/**
 * Finding 2, node memory through output: a tenant runs commands that write as fast as they can
 * and never reads their output. The node must hold a bounded amount per command (the command
 * then blocks on write), the cap a command may ask for is bounded by the cluster, nothing within
 * the cap is lost when it is read later, and killing the sandbox gives the memory back.
 *
 * Attacks through the public SDK against a real cluster: a control plane here, a `warren node`
 * child process (whose RSS is what is measured), container and function sandboxes.
 */
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, OutputDefaults } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type ExecHandle, type Sandbox } from '../../src/sdk/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from '../cluster/harness.js'
import { sleep, timed, waitFor } from '../support/index.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`unread-output container tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const MiB = 1024 * 1024
/** What the node may grow by while the output waits unread (the bound). */
const MAX_GROWTH = 64 * MiB
/** Long beside the second the windows take to fill: what the node holds then is what it keeps holding. */
const UNREAD_MS = 30_000
/** Commands writing at once: together they ask for twice the cap, and (reading is some 5 MiB/s) the reading fits the test. */
const WRITERS = 2

/** The resident memory of a process, from /proc. */
function rssOf (pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (m === null) throw new Error(`no VmRSS for ${pid}`)
  return Number(m[1]) * 1024
}

/** Reads a spawned command to its end, checking every byte is yes's "y\n" in order. */
async function readYes (h: ExecHandle): Promise<{ bytes: number, wrong: number }> {
  let bytes = 0
  let wrong = 0
  for await (const chunk of h) {
    for (let i = 0; i < chunk.data.length; i++) {
      if (chunk.data[i] !== ((bytes + i) % 2 === 0 ? 0x79 : 0x0a)) wrong++
    }
    bytes += chunk.data.length
  }
  return { bytes, wrong }
}

function refusedOn (err: unknown, field: string): boolean {
  return isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) && (err.details as Record<string, unknown> | undefined)?.field === field
}

/** A control plane here, one `warren node` child, a tenant's client: all ended with the test. */
async function cluster (defer: (fn: () => unknown) => void, nodeId: string): Promise<{ nodePid: number, client: Awaited<ReturnType<typeof connect>> }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-unread-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // A node busy streaming 128 MiB back on a shared machine may beat its heart late: the test
  // harness's 1.5 s would declare it lost mid-read, which is not what this test is about.
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 15_000 })
  defer(() => cp.close())
  const node = await spawnNode(cp, nodeId, join(dir, 'node'))
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { nodePid: node.proc.pid!, client }
}

ctest('container: unread output of fast writers holds the node to a bounded buffer; read later it is all there; a kill frees it', timed(150_000, async (defer) => {
  const { nodePid, client } = await cluster(defer, 'unread-ct')
  const sb: Sandbox = await client.create({ backend: 'container', limits: { memoryMiB: 256, cpus: 1 } })
  defer(() => sb.kill())

  // A cap beyond what the cluster allows is refused, naming the field, before anything runs.
  const huge = await sb.exec(['yes'], { maxOutputBytes: 2 ** 40 }).catch((e: unknown) => e)
  assert.ok(refusedOn(huge, 'maxOutputBytes'), `2^40 refused: ${String(huge)}`)
  const over = await sb.exec(['true'], { maxOutputBytes: OutputDefaults.maxOutputBytes + 1 }).catch((e: unknown) => e)
  assert.ok(refusedOn(over, 'maxOutputBytes'), `the cluster max + 1 refused: ${String(over)}`)

  assert.is((await sb.exec(['echo', 'warm'])).stdout, 'warm\n')
  const before = rssOf(nodePid)
  // Each writes far more than the cap (the cluster's maximum), as fast as it can, unread.
  const cap = OutputDefaults.maxOutputBytes
  const writers = await Promise.all(Array.from({ length: WRITERS }, async () =>
    await sb.spawn(['sh', '-c', `yes | head -c ${3 * cap}`], { maxOutputBytes: cap })))
  let peak = before
  const until = Date.now() + UNREAD_MS
  while (Date.now() < until) {
    peak = Math.max(peak, rssOf(nodePid))
    await sleep(1000)
  }
  const growth = peak - before
  console.log(`node RSS ${(before / MiB).toFixed(0)} MiB before, ${(peak / MiB).toFixed(0)} MiB at most over ${UNREAD_MS / 1000} s unread (${WRITERS} writers of ${cap / MiB} MiB each)`)
  assert.ok(growth <= MAX_GROWTH, `the node grew by ${(growth / MiB).toFixed(0)} MiB with ${WRITERS * cap / MiB} MiB unread`)

  // Read afterwards, every byte up to the cap is there, in order, and the result says truncated.
  const reading = Date.now()
  for (const w of writers) {
    const got = await readYes(w)
    assert.is(got.bytes, cap, 'every byte up to the cap')
    assert.is(got.wrong, 0, 'byte-exact')
    const r = await w.wait()
    assert.is(r.truncated, true)
    assert.is(r.exitCode, 0)
  }
  console.log(`read ${WRITERS * cap / MiB} MiB back in ${((Date.now() - reading) / 1000).toFixed(1)} s`)

  // A writer left unread, then its sandbox killed: what the node held goes with it.
  const again = await sb.spawn(['yes'], { maxOutputBytes: cap })
  await sleep(2000)
  const held = rssOf(nodePid)
  await sb.kill()
  await waitFor(() => sb.state === 'gone', 15_000, 'the sandbox to be gone')
  void again.wait().catch(() => undefined) // never read: it ends with its sandbox
  const after = rssOf(nodePid)
  console.log(`node RSS ${(held / MiB).toFixed(0)} MiB with a writer unread, ${(after / MiB).toFixed(0)} MiB after the kill`)
  assert.ok(after - before <= MAX_GROWTH, `after the kill the node is ${((after - before) / MiB).toFixed(0)} MiB above where it started`)
}))

test('function: the cap a call may ask for is bounded by what the node buffers for it; within it, output is all there', timed(60_000, async (defer) => {
  const { client } = await cluster(defer, 'unread-fn')
  const sb = await client.create({ backend: 'function' })
  defer(() => sb.kill())
  const huge = await sb.exec(['stream', '10', '1024'], { maxOutputBytes: 2 ** 40 }).catch((e: unknown) => e)
  assert.ok(refusedOn(huge, 'maxOutputBytes'), `2^40 refused: ${String(huge)}`)
  // A function cannot be paused mid-write, so its cap is what the node holds for one command.
  const over = await sb.exec(['stream', '10', '1024'], { maxOutputBytes: OutputDefaults.execBufferBytes + 1 }).catch((e: unknown) => e)
  assert.ok(refusedOn(over, 'maxOutputBytes'), `above the per-command buffer refused: ${String(over)}`)

  // Within the bound, written in large pieces and left unread, it is all there when read.
  const cap = OutputDefaults.execBufferBytes
  const calls = await Promise.all(Array.from({ length: WRITERS }, async () => await sb.spawn(['stream', '8', String(2 * cap / 8)], { maxOutputBytes: cap })))
  for (const c of calls) {
    let n = 0
    for await (const chunk of c) n += chunk.data.length
    assert.is(n, cap, 'every byte up to the cap')
    assert.is((await c.wait()).truncated, true)
  }
  // The default cap of a call is the same bound.
  let bytes = 0
  const d = await sb.exec(['stream', '256', '65536'], { onStdout: (c) => { bytes += c.length } })
  assert.is(d.truncated, true)
  assert.is(bytes, cap)
}))

test.run()
