/**
 * A sandbox's life through the public SDK against a real cluster: kill (one, many, by labels)
 * answers once the node's capacity is free again; what a handle and a list say after it;
 * setTtl; a backend no node offers; errors from the worker client.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { CONTROL_PLANE, containerUnavailable, parseSandboxSpec, SpecDefaults, startNode, type ControlPlane, type DirectoryMessage, type NodeMessage, type NodeOptions, type NodeProcess, type SandboxSummary } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client, type KillOutcome } from '../../src/sdk/index.js'
import { sleep, timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, functionsDir, spawnNode, startTestControlPlane } from './harness.js'

/** A control plane, one node in this process (its capacity as given) and a client of tenant `t1`. */
async function cluster (defer: (fn: () => unknown) => void, node: Partial<NodeOptions> = {}): Promise<{ cp: ControlPlane, client: Client, node: NodeProcess }> {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const n = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'life', functionsDir, ...node })
  defer(() => n.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { cp, client, node: n }
}

/** A control plane, one `warren node` process and a client of tenant `t1`. */
async function clusterWithNodeProcess (defer: (fn: () => unknown) => void): Promise<{ cp: ControlPlane, client: Client }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-life-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, 'n1', dir)
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { cp, client }
}

const noContainers = containerUnavailable()
const ctest = noContainers === undefined ? test : test.skip

function codeOf (outcome: KillOutcome): string | undefined {
  return outcome.ok ? undefined : outcome.error.code
}

test('kill answers once capacity is free: a node full with 40 sandboxes, all killed, takes 40 more at once; so does one after a refused batch', timed(60_000, async (defer) => {
  const N = 40
  const { client } = await cluster(defer, { capacity: { maxSandboxes: { function: N } } })
  for (let round = 0; round < 3; round++) {
    const sbs = await client.createMany(N, { deadlineMs: 0 })
    // Full: one more is refused without a wait.
    assert.ok(isWarrenError(await client.create({ deadlineMs: 0 }).catch((e: unknown) => e), ErrorCodes.NO_CAPACITY))
    // Half one by one, half in one request; no wait before the next create.
    const half = N / 2
    await Promise.all(sbs.slice(0, half).map((s) => s.kill()))
    const outcomes = await client.kill(sbs.slice(half).map((s) => s.id))
    assert.ok(outcomes.every((o) => o.ok && o.killed && o.state === 'gone'), JSON.stringify(outcomes.filter((o) => !o.ok)))
    assert.ok(sbs.every((s) => s.state === 'gone'))
  }
  // A batch one too large is refused whole, and what it had made is gone before the answer.
  const over = await client.createMany(N + 1, { deadlineMs: 0 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(over, ErrorCodes.NO_CAPACITY), String(over))
  assert.equal(await client.list(), [])
  assert.is((await client.createMany(N, { deadlineMs: 0 })).length, N)
}))

ctest('containers: a node with CPUs for 3 sandboxes, all 3 killed in one request, takes 3 more at once', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-life-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const { client } = await cluster(defer, { dataDir: dir, capacity: { cpus: 3, cpuOvercommit: 1 } })
  const spec = { backend: 'container' as const, limits: { cpus: 1, memoryMiB: 64 }, deadlineMs: 0 }
  for (let round = 0; round < 2; round++) {
    const sbs = await client.createMany(3, spec)
    assert.ok(isWarrenError(await client.create(spec).catch((e: unknown) => e), ErrorCodes.NO_CAPACITY), 'full')
    const startedAt = Date.now()
    const outcomes = await client.kill(sbs.map((s) => s.id))
    console.log(`  3 containers killed in ${Date.now() - startedAt} ms`)
    assert.ok(outcomes.every((o) => o.ok && o.killed), JSON.stringify(outcomes))
    assert.ok(sbs.every((s) => s.state === 'gone'))
  }
  const again = await client.createMany(3, spec)
  assert.is((await again[2]!.exec(['sh', '-c', 'echo up'])).stdout, 'up\n')
}))

test('right after await sb.kill(): state gone, exec is SANDBOX_GONE, info says killed; list shows live ones unless all or a state is asked', timed(60_000, async (defer) => {
  const { client } = await clusterWithNodeProcess(defer)
  const [dead, alive] = await client.createMany(2, { labels: { run: 'r1' } })
  await dead!.kill()
  assert.is(dead!.state, 'gone')
  const err = await dead!.exec(['js', '1']).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.SANDBOX_GONE), String(err))
  assert.match(err.message, /killed/)
  const info = await dead!.info()
  assert.is(info.state, 'gone')
  assert.is(info.reason, 'killed')
  await dead!.kill() // a second kill of an ended sandbox is not an error
  assert.equal((await client.list({ labels: { run: 'r1' } })).map((v) => v.id), [alive!.id])
  assert.equal((await client.list({ labels: { run: 'r1' }, all: true })).map((v) => v.id).sort(), [dead!.id, alive!.id].sort())
  assert.equal((await client.list({ state: 'gone' })).map((v) => v.id), [dead!.id])
  assert.is((await alive!.exec(['js', 'console.log("alive")'])).stdout, 'alive\n')
}))

test('client.kill(ids): one outcome per id in order; unknown and another tenant\'s ids are NOT_FOUND and left running; ended ones are ok, not killed again', timed(60_000, async (defer) => {
  const { cp, client } = await clusterWithNodeProcess(defer)
  const other = await connect({ url: cp.url, token: await cp.createToken('t2', [...ALL_SCOPES]) })
  defer(() => other.close())
  const theirs = await other.create({})
  const [a, b, ended] = await client.createMany(3, {})
  await ended!.kill()
  // The other tenant can neither kill nor shorten ours: NOT_FOUND, and they live on.
  assert.equal((await other.kill([a!.id, b!.id])).map(codeOf), [ErrorCodes.NOT_FOUND, ErrorCodes.NOT_FOUND])
  const shorten = await other.request({ type: 'set-ttl', id: a!.id, ttlMs: 100 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(shorten, ErrorCodes.NOT_FOUND) && shorten.details?.field === 'id', 'NOT_FOUND naming id')
  assert.is((await a!.info()).state, 'ready')
  const outcomes = await client.kill([a!.id, theirs.id, 'nosuchsandbox000', ended!.id, b!.id, a!.id])
  assert.equal(outcomes.map((o) => o.id), [a!.id, theirs.id, 'nosuchsandbox000', ended!.id, b!.id, a!.id])
  assert.equal(outcomes.map(codeOf), [undefined, ErrorCodes.NOT_FOUND, ErrorCodes.NOT_FOUND, undefined, undefined, undefined])
  assert.equal(outcomes.map((o) => o.ok && o.killed), [true, false, false, false, true, true])
  assert.is(a!.state, 'gone')
  assert.is(b!.state, 'gone')
  // The other tenant's sandbox was not touched, and what it is told is what a missing id is told.
  const missing = outcomes[2]!
  const foreign = outcomes[1]!
  assert.is(!missing.ok && missing.error.details?.field, 'ids', 'naming the request\'s ids')
  assert.is(!foreign.ok && foreign.error.message.replace(theirs.id, 'ID'), !missing.ok && missing.error.message.replace('nosuchsandbox000', 'ID'))
  assert.is((await theirs.exec(['js', 'console.log("untouched")'])).stdout, 'untouched\n')
  assert.is(theirs.state, 'ready')
}))

test('client.kill({ labels }): the live sandboxes carrying every label, this tenant\'s only', timed(60_000, async (defer) => {
  const { cp, client } = await clusterWithNodeProcess(defer)
  const other = await connect({ url: cp.url, token: await cp.createToken('t2', [...ALL_SCOPES]) })
  defer(() => other.close())
  const theirs = await other.create({ labels: { run: 'r1', part: 'x' } })
  const match = await client.createMany(3, { labels: { run: 'r1', part: 'x' } })
  const partial = await client.create({ labels: { run: 'r1', part: 'y' } })
  const outcomes = await client.kill({ labels: { run: 'r1', part: 'x' } })
  assert.equal(outcomes.map((o) => o.id).sort(), match.map((s) => s.id).sort())
  assert.ok(outcomes.every((o) => o.ok && o.killed))
  assert.ok(match.every((s) => s.state === 'gone'))
  assert.is(partial.state, 'ready')
  assert.is((await partial.info()).state, 'ready')
  assert.is((await theirs.info()).state, 'ready')
  // Nothing live matches any more: a second kill by the same labels kills nothing.
  assert.equal(await client.kill({ labels: { run: 'r1', part: 'x' } }), [])
}))

test('client.kill({ labels }) ends all of them past the 1,000 one request ends (the README\'s 1,001)', timed(90_000, async (defer) => {
  const { client } = await clusterWithNodeProcess(defer)
  const many = await client.createMany(1000, { backend: 'function', labels: { run: 'big' } })
  const one = await client.create({ backend: 'function', labels: { run: 'big' } })
  const outcomes = await client.kill({ labels: { run: 'big' } })
  assert.is(outcomes.length, 1001)
  assert.equal(new Set(outcomes.map((o) => o.id)), new Set([...many, one].map((s) => s.id)))
  assert.ok(outcomes.every((o) => o.ok && o.killed))
  assert.equal(await client.list({ labels: { run: 'big' } }), [])
}))

test('a kill\'s bounds: no ids, more than 1000, a bad id, an empty label filter or two targets are INVALID_ARGUMENT naming the field', timed(30_000, async (defer) => {
  const { client } = await cluster(defer)
  const refused = async (body: Record<string, unknown>): Promise<unknown> => {
    const err = await client.request({ type: 'kill', ...body } as never).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${JSON.stringify(body).slice(0, 80)}: ${String(err)}`)
    return err.details?.field
  }
  assert.is(await refused({ ids: [] }), 'ids')
  assert.is(await refused({ ids: Array.from({ length: 1001 }, (_, i) => `id${i}`) }), 'ids')
  assert.is(await refused({ ids: ['ok', 7] }), 'ids.1')
  assert.is(await refused({ ids: 'abc' }), 'ids')
  assert.is(await refused({ labels: {} }), 'labels')
  assert.is(await refused({ labels: { a: 1 } }), 'labels.a')
  assert.is(await refused({ id: 'a', ids: ['b'] }), 'ids')
  assert.is(await refused({}), 'id')
  const thousand = await client.kill(Array.from({ length: 1000 }, (_, i) => `nosuch${i}`))
  assert.is(thousand.length, 1000)
  assert.ok(thousand.every((o) => codeOf(o) === ErrorCodes.NOT_FOUND))
}))

test('setTtl lengthens and shortens a sandbox\'s life; expiresAt in info and list follows; bounds name ttlMs', timed(60_000, async (defer) => {
  const { client } = await clusterWithNodeProcess(defer)
  const longer = await client.create({ ttlMs: 1500, labels: { k: 'longer' } })
  const before = Date.now()
  const expiresAt = await longer.setTtl(120_000)
  assert.ok(expiresAt >= before + 120_000 && expiresAt <= Date.now() + 120_000, `expiresAt ${expiresAt}`)
  assert.is((await longer.info()).expiresAt, expiresAt)
  assert.is((await client.list({ labels: { k: 'longer' } }))[0]!.expiresAt, expiresAt)
  await sleep(2500) // past its first TTL: it lives on
  assert.is((await longer.exec(['js', 'console.log("still here")'])).stdout, 'still here\n')

  const shorter = await client.create({ ttlMs: 600_000 })
  await shorter.setTtl(200)
  await waitFor(() => shorter.state === 'gone', 10_000, 'the shortened sandbox to end')
  assert.is((await shorter.info()).reason, 'ttl')
  assert.ok(isWarrenError(await shorter.setTtl(1000).catch((e: unknown) => e), ErrorCodes.SANDBOX_GONE))

  for (const bad of [0, -5, 1.5, SpecDefaults.maxTtlMs + 1]) {
    const err = await longer.setTtl(bad).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${bad}: ${String(err)}`)
    assert.is(err.details?.field, 'ttlMs')
  }
  // The whole life stays within the maximum: what is left of it is allowed, a millisecond more is not.
  const beyond = await longer.setTtl(SpecDefaults.maxTtlMs - 10).catch((e: unknown) => e)
  assert.ok(isWarrenError(beyond, ErrorCodes.INVALID_ARGUMENT) && beyond.details?.field === 'ttlMs', String(beyond))
  assert.type(beyond.details?.max, 'number')
  assert.ok(await longer.setTtl((beyond.details!.max as number) - 5_000) > Date.now())
  assert.is(longer.state, 'ready')
}))

test('a moved TTL travels with the node\'s summary of its sandboxes, which a control plane that lost its records rebuilds them from', timed(30_000, async (defer) => {
  const { cp, client, node } = await cluster(defer)
  const sb = await client.create({ ttlMs: 600_000 })
  const expiresAt = await sb.setTtl(120_000)
  const agent = node.system.lookup<NodeMessage>(`${node.nodeId}/agent`)!
  const [summary] = await agent.ask<SandboxSummary[]>({ type: 'summaries' })
  assert.is(summary!.id, sb.id)
  assert.ok(Math.abs(summary!.expiresAt! - expiresAt) < 1000, `node ${summary!.expiresAt} vs control plane ${expiresAt}`)
  // A record the directory never heard of (as after a restart) takes the summary's end, not createdAt + spec.ttlMs.
  const directory = cp.system.lookup<DirectoryMessage>(`${CONTROL_PLANE}/directory`)!
  const ghost: SandboxSummary = { id: 'ghostsandbox0001', tenant: 't1', address: 'ghost/sb-ghostsandbox0001', spec: parseSandboxSpec({ ttlMs: 600_000 }), createdAt: Date.now(), expiresAt: Date.now() + 5000 }
  directory.tell({ type: 'node-sandboxes', nodeId: 'ghost', sandboxes: [ghost] })
  const view = await waitFor(async () => (await client.list({ all: true })).find((v) => v.id === ghost.id), 5000, 'the rebuilt record')
  assert.is(view.expiresAt, ghost.expiresAt)
}))

test('a backend no node offers (microvm, fullvm) is UNSUPPORTED naming it, at once; a full one is NO_CAPACITY; a request the SDK gives up on is TIMEOUT', timed(30_000, async (defer) => {
  const { client } = await cluster(defer, { capacity: { maxSandboxes: { function: 1 } } })
  for (const backend of ['microvm', 'fullvm'] as const) {
    const startedAt = Date.now()
    const err = await client.create({ backend, deadlineMs: 10_000 }).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.UNSUPPORTED), String(err))
    assert.is(err.details?.field, 'backend')
    assert.is(err.details?.backend, backend)
    assert.match(err.message, new RegExp(backend))
    assert.ok(Date.now() - startedAt < 5000, 'without waiting for the deadline')
  }
  await client.create({})
  const full = await client.create({ deadlineMs: 200 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(full, ErrorCodes.NO_CAPACITY), String(full))
  // A request the SDK stops waiting for (the create waits 5 s for room, the SDK 300 ms) is
  // TIMEOUT naming the request, not the transport's ASK_TIMEOUT naming a kernel address.
  const late = await client.request({ type: 'create', spec: {}, deadlineMs: 5000 }, 300).catch((e: unknown) => e)
  assert.ok(isWarrenError(late, ErrorCodes.TIMEOUT), String(late))
  assert.match(late.message, /did not answer the create request within 300 ms/)
}))

test('client.worker(): errors keep their code and details across the thread', timed(60_000, async (defer) => {
  const { client } = await cluster(defer)
  const w = await client.worker()
  defer(() => w.terminate())
  const unsupported = await w.api.create({ backend: 'microvm' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(unsupported, ErrorCodes.UNSUPPORTED), String(unsupported))
  assert.equal(unsupported.details, { field: 'backend', backend: 'microvm' })
  const badSpec = await w.api.create({ ttlMs: -1 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(badSpec, ErrorCodes.BAD_SPEC) && badSpec.details?.field === 'ttlMs', String(badSpec))
  assert.ok(isWarrenError(await w.api.info('nosuchsandbox000').catch((e: unknown) => e), ErrorCodes.NOT_FOUND))
  const view = await w.api.create({})
  await w.api.kill(view.id)
  assert.ok(isWarrenError(await w.api.exec(view.id, ['js', '1']).catch((e: unknown) => e), ErrorCodes.SANDBOX_GONE))
  const outcomes = await w.api.killMany([view.id, 'nosuchsandbox000'])
  assert.equal(outcomes.map(codeOf), [undefined, ErrorCodes.NOT_FOUND])
}))

test.run()
