/**
 * A node's heartbeat figures: what the control plane accepts (exactly NodeFigures' shape, finite
 * numbers in bounds) and what a malformed or huge heartbeat does — refused, naming the field,
 * the node still alive, nothing of it on /metrics — over a raw node link, as a buggy or hostile
 * node would send it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ActorSystem } from '../../src/actors/index.js'
import { readMetricsToken } from '../../src/cli/servers.js'
import { MetricsDefaults, NodeMeter, parseNodeFigures, type NodeFigures } from '../../src/cluster/metrics/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { ExecOutput } from '../../src/cluster/sandbox/exec-output.js'
import { createLinkClient } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { hasSample, sampleSum, scrape } from '../web/prom-text.js'
import { startTestControlPlane } from './harness.js'

function goodFigures (): NodeFigures {
  const system = new ActorSystem({ name: 'figs' })
  const meter = new NodeMeter()
  meter.started()
  meter.output(42)
  meter.ended(3)
  return meter.figures(system, { function: 1 }, undefined)
}

/** The field a refusal names, or fails the test when `v` is accepted. */
function refusedField (v: unknown): string {
  try {
    parseNodeFigures(v)
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
    return String(err.details?.field)
  }
  throw new Error(`accepted: ${JSON.stringify(v)?.slice(0, 200)}`)
}

test('a meter counts commands into the fixed buckets; its figures pass the check unchanged', () => {
  const meter = new NodeMeter()
  meter.ended(5) // at the first bound: in its bucket
  meter.ended(6)
  meter.ended(10_000_000) // beyond every bound
  const f = meter.figures(new ActorSystem({ name: 'm' }), {}, undefined)
  assert.is(f.execSeconds.counts.length, MetricsDefaults.execBuckets.length + 1)
  assert.is(f.execSeconds.counts[0], 1)
  assert.is(f.execSeconds.counts[1], 1)
  assert.is(f.execSeconds.counts[MetricsDefaults.execBuckets.length], 1)
  assert.equal(parseNodeFigures(f), f)
  assert.equal(f.sandboxes, { function: 0, container: 0, microvm: 0, fullvm: 0 })
})

test('a command\'s output counts its start, its bytes and its end once, however it ends (finished, refused, cut by its sandbox\'s end)', () => {
  const meter = new NodeMeter()
  const done = new ExecOutput(undefined, meter)
  done.append('stdout', new Uint8Array(7))
  done.append('stderr', new Uint8Array(3))
  done.finish({ exitCode: 0, durationMs: 20, truncated: false })
  const refused = new ExecOutput(undefined, meter)
  refused.fail(new Error('no such cwd'))
  const cut = new ExecOutput(undefined, meter)
  cut.close({ exitCode: 137, durationMs: 0, truncated: false, reason: 'killed' })
  cut.finish({ exitCode: 137, durationMs: 5000, truncated: false, reason: 'killed' }) // the backend's answer, after: not counted again
  assert.is(meter.execs, 3)
  assert.is(meter.outputBytes, 10)
  assert.is(meter.execCounts.reduce((a, b) => a + b, 0), 3)
  assert.ok(meter.execSum < 1, String(meter.execSum))
})

test('figures at their bounds are kept; each kind of wrong one is refused', () => {
  const g = goodFigures
  assert.is(parseNodeFigures({ ...g(), execs: Number.MAX_SAFE_INTEGER }).execs, Number.MAX_SAFE_INTEGER)
  assert.is(parseNodeFigures({ ...g(), execs: 0 }).execs, 0)
  assert.is(refusedField(null), 'figures')
  assert.is(refusedField([1, 2]), 'figures')
  assert.is(refusedField({ ...g(), extra: 1 }), 'figures')
  const { restarts: _, ...missing } = g()
  assert.is(refusedField(missing), 'figures')
  assert.is(refusedField({ ...g(), execs: '5' }), 'figures.execs')
  assert.is(refusedField({ ...g(), execs: NaN }), 'figures.execs')
  assert.is(refusedField({ ...g(), outputBytes: Infinity }), 'figures.outputBytes')
  assert.is(refusedField({ ...g(), restarts: -1 }), 'figures.restarts')
  assert.is(refusedField({ ...g(), execs: 2 ** 53 + 2 }), 'figures.execs')
  const counts = g().execSeconds.counts
  assert.is(refusedField({ ...g(), execSeconds: { counts: [...counts, 0], sum: 0 } }), 'figures.execSeconds.counts')
  assert.is(refusedField({ ...g(), execSeconds: { counts: counts.slice(1), sum: 0 } }), 'figures.execSeconds.counts')
  assert.is(refusedField({ ...g(), execSeconds: { counts: counts.map(() => -1), sum: 0 } }), 'figures.execSeconds.counts.0')
  assert.is(refusedField({ ...g(), sandboxes: { ...g().sandboxes, teleporter: 1 } }), 'figures.sandboxes')
  assert.is(refusedField({ ...g(), mailboxes: { ...g().mailboxes, sandbox: { actors: 1, queued: 0 } } }), 'figures.mailboxes.sandbox')
  assert.is(refusedField({ ...g(), deadLetters: Object.create({ overloaded: 0 }) }), 'figures.deadLetters')
  // A key like __proto__ is an own key of a decoded object, not a prototype: still an extra key.
  assert.is(refusedField({ ...g(), layerCache: JSON.parse('{"__proto__":1,"hitBytes":0,"missBytes":0,"fetchedBytes":0,"fetchFailures":0,"cachedBytes":0}') }), 'figures.layerCache')
})

test('a node sending malformed or huge figures is refused without harm: it stays alive, its figures are not printed, the refusal is counted', timed(60_000, async (defer) => {
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 60_000 })
  defer(() => cp.close())
  const link = createLinkClient({ url: cp.url, token: cp.joinToken })
  defer(() => link.close())
  await link.connect()
  const capacity = { cpus: 2, memoryMiB: 1024, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: { function: 10 }, backends: ['function'] }
  await link.request('cp/registry', { type: 'join', nodeId: 'rogue', capacity }, { timeoutMs: 10_000 })
  const beat = async (figures: unknown): Promise<unknown> => await link.request('cp/registry', { type: 'heartbeat', nodeId: 'rogue', figures }, { timeoutMs: 10_000 }).catch((e: unknown) => e)

  const bad = await beat({ ...goodFigures(), execs: -5 })
  assert.ok(isWarrenError(bad, ErrorCodes.INVALID_ARGUMENT), String(bad))
  assert.is(bad.details?.field, 'figures.execs')
  // A list as long as a frame allows: refused (by the check, or the frame limit), nothing kept.
  const huge = await beat({ ...goodFigures(), execSeconds: { counts: new Array(100_000).fill(1), sum: 1 } })
  assert.ok(isWarrenError(huge), String(huge))
  const s = await scrape(cp.url)
  assert.is(sampleSum(s, 'warren_nodes', { state: 'alive' }), 1, 'the node is still alive')
  assert.ok(hasSample(s, 'warren_node_capacity_cpus', { node: 'rogue' }))
  assert.not.ok(hasSample(s, 'warren_node_execs_total', { node: 'rogue' }), 'no figures of a refused heartbeat')
  assert.ok(sampleSum(s, 'warren_node_figures_refused_total') >= 1)

  // Good figures are kept and printed; a malformed beat after them drops them again.
  assert.equal(await beat(goodFigures()), { rejoin: false })
  const good = await scrape(cp.url)
  assert.is(sampleSum(good, 'warren_node_execs_total', { node: 'rogue' }), 1)
  assert.is(sampleSum(good, 'warren_node_output_bytes_total', { node: 'rogue' }), 42)
  assert.is(sampleSum(good, 'warren_node_exec_duration_seconds_bucket', { node: 'rogue', le: '0.005' }), 1)
  assert.ok(isWarrenError(await beat('nonsense')))
  await waitFor(async () => !hasSample(await scrape(cp.url), 'warren_node_execs_total', { node: 'rogue' }), 5000, 'figures dropped')
}))

test('a node cannot heartbeat for another: its beat as another node is answered "join" and changes nothing of that node', timed(60_000, async (defer) => {
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 60_000 })
  defer(() => cp.close())
  const capacity = { cpus: 2, memoryMiB: 1024, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: { function: 10 }, backends: ['function'] }
  const joined = async (nodeId: string): Promise<ReturnType<typeof createLinkClient>> => {
    const link = createLinkClient({ url: cp.url, token: cp.joinToken })
    defer(() => link.close())
    await link.connect()
    await link.request('cp/registry', { type: 'join', nodeId, capacity }, { timeoutMs: 10_000 })
    return link
  }
  const victim = await joined('victim')
  const rogue = await joined('rogue')
  assert.equal(await rogue.request('cp/registry', { type: 'heartbeat', nodeId: 'victim', figures: goodFigures() }, { timeoutMs: 10_000 }), { rejoin: true })
  assert.not.ok(hasSample(await scrape(cp.url), 'warren_node_execs_total', { node: 'victim' }), 'no figures put on another node')
  assert.equal(await victim.request('cp/registry', { type: 'heartbeat', nodeId: 'victim', figures: goodFigures() }, { timeoutMs: 10_000 }), { rejoin: false })
  assert.is(sampleSum(await scrape(cp.url), 'warren_node_execs_total', { node: 'victim' }), 1)
}))

test('the metrics token file: its first line, 16-4096 characters without spaces; otherwise refused naming the flag', () => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-mtok-'))
  try {
    const file = (name: string, text: string): string => { const p = join(dir, name); writeFileSync(p, text); return p }
    assert.is(readMetricsToken(file('ok', `${'a'.repeat(16)}\nignored\n`)), 'a'.repeat(16))
    assert.is(readMetricsToken(file('max', 'b'.repeat(4096))), 'b'.repeat(4096))
    for (const p of [file('short', 'a'.repeat(15)), file('long', 'c'.repeat(4097)), file('space', 'abcdefgh ijklmnopq'), join(dir, 'missing')]) {
      const err = (() => { try { readMetricsToken(p); return undefined } catch (e) { return e } })()
      assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) && err.details?.field === 'metrics-token-file', `${p}: ${String(err)}`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test.run()
