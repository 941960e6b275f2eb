/**
 * The directory's side of hibernation: a hibernating sandbox's end makes its record
 * `hibernated` (its CPU, memory and slot given back, its quota too), a kill or its TTL ends it
 * without giving anything back twice, a resume makes it ready on its new node, and what live
 * and hibernated records use is what the snapshot collector must keep.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, type Ref } from '../../../src/actors/index.js'
import { createDirectory, createPlacementShard, DirectoryDefaults, parseSandboxSpec, placementRequestOf, type DirectoryMessage, type SandboxRecord, type ShardMessage, type ShardStats } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { HibernatedSet } from '../../../src/cluster/control/directory-hibernation.js'
import { timed } from '../../support/index.js'

/** Counts the quota the directory gives back. */
class Iam extends Actor<{ type: string, n?: number }> {
  released = 0
  receive (m: { type: string, n?: number }): unknown {
    if (m.type === 'release') this.released += m.n ?? 1
    if (m.type === 'released') return this.released
    return undefined
  }
}

const spec = parseSandboxSpec({ backend: 'container', limits: { cpus: 2, memoryMiB: 100 }, image: { base: 'busybox' } })
const layer = `sha256:${'a'.repeat(64)}`
const withDiff = { ...spec, image: { base: 'busybox', diffs: [layer] } }
const req = placementRequestOf(spec)

interface Setup { dir: Ref<DirectoryMessage>, shard: Ref<ShardMessage>, iam: Ref<{ type: string }> }

/** A directory over a real placement shard holding `nodes` (8 CPUs each, no overcommit). */
function setup (defer: (fn: () => unknown) => void, nodes = ['n1']): Setup {
  const system = new ActorSystem({ name: 'dh' })
  defer(() => system.shutdown(1000))
  const shard = system.spawn<ShardMessage>(createPlacementShard(), { name: 'shard-0' })
  const iam = system.spawn<{ type: string }>(() => new Iam(), { name: 'iam' })
  const dir = system.spawn<DirectoryMessage>(createDirectory({ shards: () => [shard], iam: () => iam as never }), { name: 'directory' })
  for (const id of nodes) shard.tell({ type: 'node-up', id, capacity: { cpus: 8, memoryMiB: 1000, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['container'] } })
  return { dir, shard, iam }
}

function record (id: string): SandboxRecord {
  return { id, tenant: 't', nodeId: 'n1', address: `n1/sb-${id}`, state: 'ready', backend: 'container', labels: {}, createdAt: 1, expiresAt: Date.now() + 60_000, req, spec }
}

/** The shard's allocation and the quota given back, once the directory handled what it was sent. */
async function held (s: Setup): Promise<{ cpus: number, sandboxes: number, released: number }> {
  await s.dir.ask({ type: 'count' })
  const stats = await s.shard.ask<ShardStats>({ type: 'stats' })
  return { cpus: stats.allocatedCpus, sandboxes: stats.sandboxes, released: await s.iam.ask<number>({ type: 'released' }) }
}

const get = async (s: Setup, id: string): Promise<SandboxRecord> => await s.dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id })

test('a hibernating sandbox\'s end makes it hibernated: its node, CPU, memory and quota go back once, and a kill ends it for good', timed(5000, async (defer) => {
  const s = setup(defer)
  await s.shard.ask({ type: 'place', req, deadline: Date.now() + 1000 })
  s.dir.tell({ type: 'add', records: [record('a')] })
  assert.equal(await held(s), { cpus: 2, sandboxes: 1, released: 0 })
  await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'a', snapshot: 'snap-0000000000000001' })
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  const h = await get(s, 'a')
  assert.is(h.state, 'hibernated')
  assert.is(h.snapshot, 'snap-0000000000000001')
  assert.is(h.reason, undefined)
  assert.equal(await held(s), { cpus: 0, sandboxes: 0, released: 1 })
  assert.equal((await s.dir.ask<SandboxRecord[]>({ type: 'list', tenant: 't' })).map((r) => r.id), ['a'], 'listed as not ended')
  assert.equal((await s.dir.ask<Array<Record<string, number>>>({ type: 'usage', nodeIds: ['n1'] })), { n1: { cpus: 0, memoryMiB: 0, memoryByBackend: {}, sandboxes: {} } })
  // A late event of its old actor is not news; another tenant's kill changes nothing.
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'failed' }] })
  s.dir.tell({ type: 'killing', tenant: 'other', ids: ['a'] })
  assert.is((await get(s, 'a')).state, 'hibernated')
  const used = await s.dir.ask<{ layers: string[], snapshots: string[] }>({ type: 'in-use' })
  assert.equal(used.snapshots, ['snap-0000000000000001'])
  s.dir.tell({ type: 'killing', tenant: 't', ids: ['a'] })
  const ended = await get(s, 'a')
  assert.is(ended.state, 'gone')
  assert.is(ended.reason, 'killed')
  assert.equal(await held(s), { cpus: 0, sandboxes: 0, released: 1 }, 'nothing given back twice')
  assert.equal((await s.dir.ask<{ snapshots: string[] }>({ type: 'in-use' })).snapshots, [])
}))

test('a kill asked for while a hibernate cuts its snapshot wins: the hibernate is refused and the end is gone (killed), not hibernated', timed(5000, async (defer) => {
  const s = setup(defer)
  s.dir.tell({ type: 'add', records: [record('a')] })
  // The kill reaches the directory before the hibernate's snapshot is done.
  s.dir.tell({ type: 'killing', tenant: 't', ids: ['a'] })
  const refused = await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'a', snapshot: 'snap-0000000000000001' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(refused, ErrorCodes.SANDBOX_GONE), String(refused))
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  const ended = await get(s, 'a')
  assert.equal([ended.state, ended.reason, ended.snapshot], ['gone', 'killed', undefined])
  // Another tenant's kill of a live sandbox asks nothing of it.
  s.dir.tell({ type: 'add', records: [record('b')] })
  s.dir.tell({ type: 'killing', tenant: 'other', ids: ['b'] })
  assert.is(await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'b', snapshot: 'snap-0000000000000002' }), true)
}))

test('a resumed sandbox is ready on its new node with its new stack; a resume of one no longer hibernated answers false', timed(5000, async (defer) => {
  const s = setup(defer, ['n2'])
  s.dir.tell({ type: 'add', records: [record('a')] })
  await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'a', snapshot: 'snap-0000000000000001' })
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone' }] })
  const req2 = placementRequestOf(withDiff)
  await s.shard.ask({ type: 'place', req: req2, deadline: Date.now() + 1000 })
  assert.is(await s.dir.ask({ type: 'resumed', tenant: 'other', id: 'a', nodeId: 'n2', address: 'n2/sb-a', spec: withDiff, req: req2 }), false)
  // One resume at a time: a second claim waits its turn, another tenant's is never one.
  assert.is(await s.dir.ask({ type: 'resume-claim', tenant: 'other', id: 'a' }), false)
  assert.is(await s.dir.ask({ type: 'resume-claim', tenant: 't', id: 'a' }), true)
  assert.is(await s.dir.ask({ type: 'resume-claim', tenant: 't', id: 'a' }), false)
  s.dir.tell({ type: 'resume-release', id: 'a' })
  assert.is(await s.dir.ask({ type: 'resume-claim', tenant: 't', id: 'a' }), true)
  assert.is(await s.dir.ask({ type: 'resumed', tenant: 't', id: 'a', nodeId: 'n2', address: 'n2/sb-a', spec: withDiff, req: req2 }), true)
  const r = await get(s, 'a')
  assert.equal([r.state, r.nodeId, r.address, r.snapshot], ['ready', 'n2', 'n2/sb-a', undefined])
  assert.equal((await s.dir.ask<{ layers: string[] }>({ type: 'in-use' })).layers, ['busybox', layer])
  // Events of its old node are not its own any more; its new node's are.
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone' }] })
  assert.is((await get(s, 'a')).state, 'ready')
  s.dir.tell({ type: 'events', nodeId: 'n2', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  assert.is((await get(s, 'a')).state, 'gone')
  assert.is((await held(s)).cpus, 0, 'the resumed one gave its new reservation back')
  assert.is(await s.dir.ask({ type: 'resumed', tenant: 't', id: 'a', nodeId: 'n2', address: 'n2/sb-a', spec: withDiff, req: req2 }), false)
}))

test('a kill during a hibernate wins (the end is gone), a hibernate of an ended sandbox is refused, a hibernated one ends with its TTL', timed(5000, async (defer) => {
  const s = setup(defer)
  s.dir.tell({ type: 'add', records: [record('a'), { ...record('b'), expiresAt: Date.now() - 1 }] })
  await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'a', snapshot: 'snap-0000000000000001' })
  s.dir.tell({ type: 'killing', tenant: 't', ids: ['a'] })
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  assert.is((await get(s, 'a')).state, 'gone')
  const err = await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'a', snapshot: 'snap-0000000000000002' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.NOT_FOUND))
  const other = await s.dir.ask({ type: 'hibernating', tenant: 'other', id: 'b', snapshot: 'snap-0000000000000002' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(other, ErrorCodes.NOT_FOUND), 'another tenant\'s is not found')

  await s.dir.ask({ type: 'hibernating', tenant: 't', id: 'b', snapshot: 'snap-0000000000000003' })
  s.dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'b', tenant: 't', state: 'gone' }] })
  assert.is((await get(s, 'b')).state, 'hibernated')
  s.dir.tell({ type: 'sweep' })
  const b = await get(s, 'b')
  assert.equal([b.state, b.reason], ['gone', 'ttl'])
  assert.ok(DirectoryDefaults.maxHibernatedPerTenant >= 1000)
}))

test('a tenant at its bound of hibernated sandboxes is refused QUOTA naming the quota; another tenant is not', () => {
  const set = new HibernatedSet(1)
  const record = (id: string, tenant: string): SandboxRecord => ({ id, tenant, state: 'ready' } as unknown as SandboxRecord)
  set.add(set.admit(record('a1', 'a'), 'a', 'a1', false))
  const refused = (() => { try { set.admit(record('a2', 'a'), 'a', 'a2', false); return undefined } catch (e) { return e } })()
  assert.ok(isWarrenError(refused, ErrorCodes.QUOTA), String(refused))
  assert.equal([refused.details?.quota, refused.details?.max], ['hibernated', 1])
  assert.is(set.admit(record('b1', 'b'), 'b', 'b1', false).id, 'b1')
})

test.run()
