/**
 * The directory's side of a restore: only an ended (or forgotten) sandbox may be restored, one
 * restore of an id at a time, another tenant's answers as an unknown one; the restored record
 * takes the ended one's place on its new node, and neither its old node's loss or return nor the
 * sweep of ended records ends or forgets it.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ActorSystem, type Ref } from '../../../src/actors/index.js'
import { createDirectory, createPlacementShard, DirectoryDefaults, parseSandboxSpec, placementRequestOf, type DirectoryMessage, type SandboxRecord, type ShardMessage } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type ErrorCode } from '../../../src/errors.js'
import { timed } from '../../support/index.js'

const spec = parseSandboxSpec({ backend: 'container' })
const req = placementRequestOf(spec)

function setup (defer: (fn: () => unknown) => void): Ref<DirectoryMessage> {
  const system = new ActorSystem({ name: 'dr' })
  defer(() => system.shutdown(1000))
  const shard = system.spawn<ShardMessage>(createPlacementShard(), { name: 'shard-0' })
  const iam = system.spawn<{ type: string }>(() => ({ receive: () => undefined }) as never, { name: 'iam' })
  for (const id of ['n1', 'n2']) shard.tell({ type: 'node-up', id, capacity: { cpus: 8, memoryMiB: 8000, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['container'] } })
  return system.spawn<DirectoryMessage>(createDirectory({ shards: () => [shard], iam: () => iam as never }), { name: 'directory' })
}

function record (id: string, nodeId = 'n1', tenant = 't'): SandboxRecord {
  return { id, tenant, nodeId, address: `${nodeId}/sb-${id}`, state: 'ready', backend: 'container', labels: {}, createdAt: Date.now(), expiresAt: Date.now() + 60_000, req, spec }
}

async function refused (p: Promise<unknown>, code: ErrorCode, field?: string): Promise<void> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code), `expected ${code}, got ${String(err)}`)
  if (field !== undefined) assert.is((err.details as { field?: unknown } | undefined)?.field, field)
}

const get = async (dir: Ref<DirectoryMessage>, id: string): Promise<SandboxRecord> => await dir.ask<SandboxRecord>({ type: 'get', tenant: 't', id })
const claim = (dir: Ref<DirectoryMessage>, id: string, tenant = 't'): Promise<unknown> => dir.ask({ type: 'restore-claim', tenant, id })

test('a restore claims an ended or unknown id, once at a time; a live or hibernated one is refused naming id, another tenant\'s is NOT_FOUND', timed(5000, async (defer) => {
  const dir = setup(defer)
  dir.tell({ type: 'add', records: [record('live'), record('lost'), record('hib')] })
  await dir.ask({ type: 'hibernating', tenant: 't', id: 'hib', snapshot: 'snap-0000000000000001' })
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'hib', tenant: 't', state: 'gone', reason: 'killed' }] })
  assert.is((await get(dir, 'hib')).state, 'hibernated')
  await refused(claim(dir, 'live'), ErrorCodes.INVALID_ARGUMENT, 'id')
  await refused(claim(dir, 'hib'), ErrorCodes.INVALID_ARGUMENT, 'id')
  dir.tell({ type: 'events', nodeId: 'n1', events: [{ id: 'lost', tenant: 't', state: 'gone', reason: 'killed' }] })
  await refused(claim(dir, 'lost', 'other'), ErrorCodes.NOT_FOUND)
  assert.is(await claim(dir, 'lost'), true)
  await refused(claim(dir, 'lost'), ErrorCodes.INVALID_ARGUMENT, 'id')
  dir.tell({ type: 'restore-release', id: 'lost' })
  assert.is(await claim(dir, 'lost'), true, 'claimable again once released')
  assert.is(await claim(dir, 'forgotten'), true, 'an id the directory no longer has (its trajectory says whose it is)')
}))

test('a restored record takes the lost one\'s place on its new node: the old node\'s loss, its return without it and the sweep leave it be', timed(5000, async (defer) => {
  const dir = setup(defer)
  dir.tell({ type: 'add', records: [record('a', 'n1')] })
  dir.tell({ type: 'node-lost', nodeId: 'n1' })
  assert.is((await get(dir, 'a')).state, 'lost')
  await claim(dir, 'a')
  assert.is(await dir.ask({ type: 'restored', record: record('a', 'n2') }), true)
  const back = await get(dir, 'a')
  assert.equal([back.state, back.nodeId, back.address, back.reason, back.endedAt], ['ready', 'n2', 'n2/sb-a', undefined, undefined])
  dir.tell({ type: 'node-lost', nodeId: 'n1' })
  dir.tell({ type: 'node-sandboxes', nodeId: 'n1', sandboxes: [] })
  assert.is((await get(dir, 'a')).state, 'ready', 'the old node\'s word is not about it any more')
  const retention = DirectoryDefaults.endedRetentionMs
  DirectoryDefaults.endedRetentionMs = 0
  defer(() => { DirectoryDefaults.endedRetentionMs = retention })
  await new Promise((resolve) => setTimeout(resolve, 5))
  dir.tell({ type: 'sweep' })
  assert.is((await get(dir, 'a')).state, 'ready', 'not forgotten as the ended record it was')
  // A restore whose sandbox came back meanwhile (live again) does not take its place.
  await refused(claim(dir, 'a'), ErrorCodes.INVALID_ARGUMENT, 'id')
  assert.is(await dir.ask({ type: 'restored', record: record('a', 'n1') }), false)
  assert.is((await get(dir, 'a')).nodeId, 'n2')
  dir.tell({ type: 'events', nodeId: 'n2', events: [{ id: 'a', tenant: 't', state: 'gone', reason: 'killed' }] })
  assert.is((await get(dir, 'a')).state, 'gone', 'its new node\'s events are its own')
}))

test.run()
