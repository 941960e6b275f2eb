/**
 * The directory's side of pausing: the record follows the newest of the reports (the session's
 * and the node's), a paused sandbox's CPU goes back to placement and comes back at its resume,
 * its end gives back only what it still held, and a rebuild from node summaries keeps it paused.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, type Ref } from '../../../src/actors/index.js'
import { createDirectory, createPlacementShard, parseSandboxSpec, placementRequestOf, type DirectoryMessage, type SandboxRecord, type SandboxSummary, type ShardMessage, type ShardStats } from '../../../src/cluster/index.js'
import { timed, waitFor } from '../../support/index.js'

class Sink extends Actor<unknown> {
  receive (): unknown { return undefined }
}

const spec = parseSandboxSpec({ backend: 'container', limits: { cpus: 2, memoryMiB: 100 } })
const req = placementRequestOf(spec)

/** A directory over one real placement shard holding node n1 (8 CPUs, no overcommit). */
function setup (defer: (fn: () => unknown) => void): { dir: Ref<DirectoryMessage>, shard: Ref<ShardMessage> } {
  const system = new ActorSystem({ name: 'dp' })
  defer(() => system.shutdown(1000))
  const shard = system.spawn<ShardMessage>(createPlacementShard(), { name: 'shard-0' })
  const iam = system.spawn(() => new Sink(), { name: 'iam' })
  const dir = system.spawn<DirectoryMessage>(createDirectory({ shards: () => [shard], iam: () => iam as never }), { name: 'directory' })
  directory = dir
  shard.tell({ type: 'node-up', id: 'n1', capacity: { cpus: 8, memoryMiB: 1000, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['container'] } })
  return { dir, shard }
}

function record (id: string): SandboxRecord {
  return { id, tenant: 't', nodeId: 'n1', address: `n1/sb-${id}`, state: 'ready', backend: 'container', labels: {}, createdAt: 1, expiresAt: 2, req, spec }
}

/** CPUs reserved on the shard once the directory has handled what it was sent (its tells to the shard go first). */
let directory: Ref<DirectoryMessage>
const cpus = async (shard: Ref<ShardMessage>): Promise<number> => {
  await directory.ask({ type: 'count' })
  return (await shard.ask<ShardStats>({ type: 'stats' })).allocatedCpus
}

test('pause and resume: the newest report wins, the CPU share follows, list by state paused works', timed(5000, async (defer) => {
  const { dir, shard } = setup(defer)
  await shard.ask({ type: 'place', req, deadline: Date.now() + 1000 })
  dir.tell({ type: 'add', records: [record('a')] })
  assert.is(await cpus(shard), 2)

  dir.tell({ type: 'pause-state', tenant: 't', id: 'a', state: 'paused', pauseSeq: 1, expiresAt: 5 })
  const paused = await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'a' })
  assert.is(paused.state, 'paused')
  assert.is(paused.expiresAt, 5)
  assert.is(await cpus(shard), 0, 'its CPU is free for others')
  assert.equal((await dir.ask<SandboxRecord[]>({ type: 'list', tenant: 't', state: 'paused' })).map((r) => r.id), ['a'])
  assert.equal((await dir.ask<SandboxRecord[]>({ type: 'list', tenant: 't' })).map((r) => r.id), ['a'], 'a paused sandbox is live')
  assert.equal(await dir.ask<SandboxRecord[]>({ type: 'list', tenant: 'other', state: 'paused' }), [])

  // The node's report of the same pause comes later: nothing changes, nothing is released twice.
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'paused', pauseSeq: 1, expiresAt: 5 }] })
  assert.is(await cpus(shard), 0)
  dir.tell({ type: 'pause-state', tenant: 't', id: 'a', state: 'ready', pauseSeq: 2, expiresAt: 9 })
  assert.is((await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'a' })).state, 'ready')
  assert.is(await cpus(shard), 2, 'taken back at the resume')
  // A late report of the pause (older than the resume) is ignored.
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'paused', pauseSeq: 1 }] })
  const after = await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'a' })
  assert.is(after.state, 'ready')
  assert.is(after.expiresAt, 9)
  assert.is(await cpus(shard), 2)
  // Another tenant's pause-state changes nothing.
  dir.tell({ type: 'pause-state', tenant: 'other', id: 'a', state: 'paused', pauseSeq: 3, expiresAt: 9 })
  assert.is((await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'a' })).state, 'ready')
}))

test('a paused sandbox that ends gives back only what it still held', timed(5000, async (defer) => {
  const { dir, shard } = setup(defer)
  await shard.ask({ type: 'place', req, deadline: Date.now() + 1000 })
  await shard.ask({ type: 'place', req, deadline: Date.now() + 1000 })
  dir.tell({ type: 'add', records: [record('a'), record('b')] })
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'paused', pauseSeq: 1 }] })
  assert.is(await cpus(shard), 2)
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  await waitFor(async () => (await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'a' })).state === 'gone', 2000, 'gone')
  assert.is(await cpus(shard), 2, 'b still holds its 2 CPUs')
  assert.is((await shard.ask<ShardStats>({ type: 'stats' })).sandboxes, 1)
}))

test('rebuilt from node summaries after a restart, a paused sandbox is paused and holds no CPU; a report lost with the link is caught up', timed(5000, async (defer) => {
  const { dir, shard } = setup(defer)
  const summary = (id: string, paused: boolean, pauseSeq: number): SandboxSummary => ({ id, tenant: 't', address: `n1/sb-${id}`, spec, createdAt: 1, expiresAt: 7, paused, pauseSeq })
  dir.tell({ type: 'node-sandboxes', nodeId: 'n1', sandboxes: [summary('p', true, 1), summary('r', false, 0)] })
  const p = await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'p' })
  assert.is(p.state, 'paused')
  assert.is((await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'r' })).state, 'ready')
  assert.is(await cpus(shard), 2, 'only the running one holds CPU')
  const usage = await dir.ask<Record<string, { cpus: number, memoryMiB: number }>>({ type: 'usage', nodeIds: ['n1'] })
  assert.equal([usage.n1!.cpus, usage.n1!.memoryMiB], [2, 200], 'what a restarted shard reserves again')

  // The node rejoins saying r was paused meanwhile (its report lost): the record follows.
  dir.tell({ type: 'node-sandboxes', nodeId: 'n1', sandboxes: [summary('p', false, 2), summary('r', true, 1)] })
  assert.is((await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'r' })).state, 'paused')
  assert.is((await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id: 'p' })).state, 'ready')
  assert.is(await cpus(shard), 2)
}))

test.run()
