/**
 * /metrics, /healthz and /readyz over real HTTP on a real cluster: the counters move by what
 * was done (creations by backend, execs and output bytes counted on the nodes and carried in
 * their heartbeats, refusals by code), a lost node's series go, and nothing secret is printed.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, functionsDir, spawnNode, startTestControlPlane } from '../cluster/harness.js'
import { hasSample, httpGet, sampleSum, scrape, type PromSample } from './prom-text.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container part of the metrics test skipped: ${why}`)

test('/healthz answers at once; /readyz is 503 until a node joins, 200 while one is alive, 503 after it is gone', timed(60_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const live = await httpGet(cp.url, '/healthz')
  assert.is(live.status, 200)
  assert.is(live.body, 'ok\n')
  assert.is((await httpGet(cp.url, '/healthz', { method: 'POST' })).status, 405)
  const before = await httpGet(cp.url, '/readyz?verbose=1')
  assert.is(before.status, 503)
  assert.match(before.body, /no node has joined/)

  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'mw-ready', functionsDir, heartbeatEveryMs: 100 })
  let closed = false
  defer(async () => { if (!closed) await node.close() })
  await waitFor(async () => (await httpGet(cp.url, '/readyz')).status === 200, 10_000, '/readyz 200')
  const s = await scrape(cp.url)
  assert.is(sampleSum(s, 'warren_nodes', { state: 'alive' }), 1)
  assert.ok(hasSample(s, 'warren_node_capacity_cpus', { node: 'mw-ready' }), 'capacity labelled by node')
  await waitFor(async () => hasSample(await scrape(cp.url), 'warren_node_execs_total', { node: 'mw-ready' }), 10_000, 'the node\'s heartbeat figures')

  // A node that leaves is lost at once: not ready, and none of its series are printed any more.
  await node.close()
  closed = true
  await waitFor(async () => (await httpGet(cp.url, '/readyz')).status === 503, 10_000, '/readyz 503 again')
  assert.match((await httpGet(cp.url, '/readyz')).body, /no node is alive/)
  const after = await scrape(cp.url)
  assert.is(sampleSum(after, 'warren_nodes', { state: 'lost' }), 1)
  assert.not.ok(after.some((x) => x.labels.node === 'mw-ready'), 'no series of the lost node')
}))

test('counters move by what was done: creations by backend, execs and output bytes by node, refusals by code', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-metrics-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const fnNode = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'mw-fn', functionsDir, heartbeatEveryMs: 100 })
  defer(() => fnNode.close())
  const ctNode = why === undefined ? await spawnNode(cp, 'mw-ct', join(dir, 'node')) : undefined
  defer(() => ctNode?.kill())
  const tenant = 'tenant-metrics-secret'
  const token = await cp.createToken(tenant, [...ALL_SCOPES])
  const client = await connect({ url: cp.url, token })
  defer(() => client.close())
  const before = await scrape(cp.url)
  const delta = (now: PromSample[], name: string, labels: Record<string, string> = {}): number => sampleSum(now, name, labels) - sampleSum(before, name, labels)

  // Commands run and output bytes written, by the node that ran them: the container node also
  // offers function sandboxes, so a function sandbox may land on either node.
  const execsOn: Record<string, number> = { 'mw-fn': 0, 'mw-ct': 0 }
  const bytesOn: Record<string, number> = { 'mw-fn': 0, 'mw-ct': 0 }
  const fnOn: Record<string, number> = { 'mw-fn': 0, 'mw-ct': 0 }
  // Two function sandboxes in one request, a command each printing 100 bytes.
  const fns = await client.createMany(2, { backend: 'function', ttlMs: 600_000 })
  for (const sb of fns) {
    const r = await sb.exec(['js', 'console.log("x".repeat(99))'], { timeoutMs: 10_000 })
    assert.is(r.stdout.length, 100)
    const { nodeId } = await sb.info()
    execsOn[nodeId]!++
    bytesOn[nodeId]! += 100
    fnOn[nodeId]!++
  }
  if (ctNode !== undefined) {
    const sb = await client.create({ backend: 'container', ttlMs: 600_000 })
    assert.is((await sb.info()).nodeId, 'mw-ct')
    assert.is((await sb.exec(['sh', '-c', 'printf abc; printf de >&2'])).stdout, 'abc')
    assert.is((await sb.exec(['true'])).exitCode, 0)
    execsOn['mw-ct']! += 2
    bytesOn['mw-ct']! += 5
  }
  // Refused before placement (a bad spec) and at placement (a backend no node offers).
  const bad = await client.create({ backend: 'teleporter' as 'function' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(bad, ErrorCodes.BAD_SPEC))
  const none = await client.create({ backend: 'fullvm', deadlineMs: 0 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(none), String(none))
  const noneCode = (none as { code: string }).code

  // Node figures travel in heartbeats: wait until they show every command's end.
  const nodes = Object.keys(execsOn).filter((n) => execsOn[n]! > 0)
  const now = await waitFor(async () => {
    const s = await scrape(cp.url)
    return nodes.every((node) => delta(s, 'warren_node_exec_duration_seconds_count', { node }) >= execsOn[node]!) ? s : undefined
  }, 20_000, 'the nodes\' figures')

  assert.is(delta(now, 'warren_sandbox_creations_total', { backend: 'function' }), 2)
  assert.is(delta(now, 'warren_sandbox_creation_seconds_count', { backend: 'function' }), 2)
  assert.is(delta(now, 'warren_sandbox_creation_seconds_bucket', { backend: 'function', start: 'cold', le: '+Inf' }), 2)
  assert.ok(hasSample(now, 'warren_sandbox_creation_seconds_bucket', { backend: 'function', le: '0.005' }), 'histogram buckets printed')
  for (const node of nodes) {
    assert.is(delta(now, 'warren_node_execs_total', { node }), execsOn[node], `execs on ${node}`)
    assert.is(delta(now, 'warren_node_exec_duration_seconds_count', { node }), execsOn[node])
    assert.is(delta(now, 'warren_node_exec_duration_seconds_bucket', { node, le: '+Inf' }), execsOn[node])
    assert.is(delta(now, 'warren_node_output_bytes_total', { node }), bytesOn[node], `output bytes on ${node}`)
    assert.is(sampleSum(now, 'warren_node_sandboxes', { node, backend: 'function' }), fnOn[node])
  }
  assert.is(sampleSum(now, 'warren_sandboxes', { state: 'ready', backend: 'function' }), 2)
  if (ctNode !== undefined) {
    assert.is(delta(now, 'warren_sandbox_creations_total', { backend: 'container' }), 1)
    assert.is(sampleSum(now, 'warren_node_sandboxes', { node: 'mw-ct', backend: 'container' }), 1)
    assert.ok(hasSample(now, 'warren_node_layer_cache_hit_bytes_total', { node: 'mw-ct' }))
  }
  assert.is(delta(now, 'warren_requests_refused_total', { request: 'create', code: ErrorCodes.BAD_SPEC }), 1)
  assert.is(delta(now, 'warren_requests_refused_total', { request: 'create', code: noneCode }), 1)
  assert.is(delta(now, 'warren_sandbox_creation_failures_total', { backend: 'fullvm', code: noneCode }), 1)
  // The kernel's figures: actors and mailboxes by kind, dead letters by reason.
  assert.ok(sampleSum(now, 'warren_actors', { kind: 'Session' }) >= 1)
  assert.ok(hasSample(now, 'warren_mailbox_depth_max', { kind: 'SandboxDirectory' }))
  assert.ok(hasSample(now, 'warren_dead_letters_total', { reason: 'overloaded' }))
  assert.ok(sampleSum(now, 'warren_node_actors', { kind: 'sandbox' }) >= 2)
  assert.ok(hasSample(now, 'process_cpu_seconds_total'), 'the process figures too')

  // Nothing secret: no key, no join token, no tenant name.
  const body = (await httpGet(cp.url, '/metrics')).body
  for (const secret of [token, cp.joinToken, tenant]) assert.not.ok(body.includes(secret), 'a secret is printed')
}))

test('a placement shard that crashes is restarted and counted, by shard and by supervisor', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const shard = cp.system.lookup('cp/shard-1')
  assert.ok(shard !== undefined)
  cp.system.kill(shard)
  const s = await waitFor(async () => { const x = await scrape(cp.url); return sampleSum(x, 'warren_placement_shard_restarts_total', { shard: '1' }) === 1 ? x : undefined }, 10_000, 'the restart counted')
  assert.is(sampleSum(s, 'warren_supervisor_restarts_total', { supervisor: 'placement' }), 1)
  assert.is(sampleSum(s, 'warren_placement_shard_restarts_total', { shard: '0' }), 0)
}))

test('with a metrics token, /metrics wants it as a bearer token; /healthz still needs none', timed(30_000, async (defer) => {
  const metricsToken = 'm-'.padEnd(32, 'x')
  const cp = await startTestControlPlane({ metricsToken })
  defer(() => cp.close())
  const none = await httpGet(cp.url, '/metrics')
  assert.is(none.status, 401)
  assert.is(none.headers['www-authenticate'], 'Bearer realm="warren metrics"')
  assert.is((await httpGet(cp.url, '/metrics', { headers: { Authorization: 'Bearer wrong' } })).status, 401)
  assert.is((await httpGet(cp.url, '/metrics', { headers: { Authorization: metricsToken } })).status, 401)
  const ok = await httpGet(cp.url, '/metrics', { headers: { Authorization: `Bearer ${metricsToken}` } })
  assert.is(ok.status, 200)
  assert.match(String(ok.headers['content-type']), /^text\/plain/)
  assert.match(ok.body, /# TYPE warren_sandbox_creations_total counter/)
  assert.is((await httpGet(cp.url, '/healthz')).status, 200)
  // Other paths are still the blob store's.
  assert.is((await httpGet(cp.url, '/blobs/nothing')).status >= 400, true)
}))

test.run()
