import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ActorSystem, type Ref } from '../../src/actors/index.js'
import { createPlacementShard, type NodeCapacity, type PlacementRequest, type ShardMessage, type ShardStats } from '../../src/cluster/placement/index.js'
import { parseSandboxSpec, placementRequestOf } from '../../src/cluster/spec.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'

const cap = (over: Partial<NodeCapacity> = {}): NodeCapacity => ({
  cpus: 2, memoryMiB: 1024, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['function', 'container'], ...over
})
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({ backend: 'function', cpus: 1, memoryMiB: 256, layers: [], ...over })

async function place (shard: Ref<ShardMessage>, r: PlacementRequest, waitMs = 0): Promise<string | undefined> {
  const res = await shard.ask<{ nodeId: string | undefined }>({ type: 'place', req: r, deadline: Date.now() + waitMs })
  return res.nodeId
}

test('places only on nodes that offer the backend and have room under overcommit', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  shard.tell({ type: 'node-up', id: 'fn-only', capacity: cap({ backends: ['function'] }) })
  shard.tell({ type: 'node-up', id: 'both', capacity: cap({ cpuOvercommit: 2 }) })
  assert.is(await place(shard, req({ backend: 'container' })), 'both')
  const seen = new Set<string | undefined>()
  for (let i = 0; i < 5; i++) seen.add(await place(shard, req()))
  // fn-only holds 2 CPUs, both 4 (overcommit 2) of which 1 went to the container: 5 fit in all.
  assert.equal([...seen].sort(), ['both', 'fn-only'])
  const err = await place(shard, req()).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.NO_CAPACITY), String(err))
}))

test('a backend capped in memory gets no more than its cap, whatever the overcommit; the others share the rest as before; one past the cap alone is refused at once', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  // A VM's guest RAM is taken for real: 16 x overcommit for containers, none for VMs.
  shard.tell({ type: 'node-up', id: 'n', capacity: cap({ cpus: 64, memoryMiB: 1024, memoryOvercommit: 16, maxMemoryMiB: { microvm: 700 }, backends: ['container', 'microvm'] }) })
  const vm = req({ backend: 'microvm', memoryMiB: 300 })
  assert.is(await place(shard, vm), 'n')
  assert.is(await place(shard, vm), 'n')
  const full = await place(shard, vm).catch((e: unknown) => e)
  assert.ok(isWarrenError(full, ErrorCodes.NO_CAPACITY), `a third 300 MiB VM is past 700: ${String(full)}`)
  for (let i = 0; i < 10; i++) assert.is(await place(shard, req({ backend: 'container', memoryMiB: 1000 })), 'n', 'containers still overcommit')
  shard.tell({ type: 'release', nodeId: 'n', req: vm })
  assert.is(await place(shard, vm), 'n', 'room again once one ended')
  const huge = await place(shard, req({ backend: 'microvm', memoryMiB: 800 }), 10_000).catch((e: unknown) => e)
  assert.ok(isWarrenError(huge, ErrorCodes.NO_CAPACITY), String(huge))
  assert.is(huge.details?.field, 'limits.memoryMiB', 'past the cap of every node: refused at once, naming the limit')
}))

test('a request larger than every node is refused at once, naming the limit; one of a backend no joined node offers is UNSUPPORTED at once', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  // Overcommit shares a machine; it never makes one sandbox larger than the machine.
  shard.tell({ type: 'node-up', id: 'wide', capacity: cap({ cpus: 4, memoryMiB: 512, diskMiB: 512, cpuOvercommit: 64, memoryOvercommit: 16 }) })
  shard.tell({ type: 'node-up', id: 'deep', capacity: cap({ cpus: 2, memoryMiB: 1024, backends: ['function'] }) })
  const refused = async (r: PlacementRequest): Promise<unknown> => {
    const err = await place(shard, r, 10_000).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.NO_CAPACITY), String(err))
    return err.details?.field
  }
  assert.is(await refused(req({ memoryMiB: 2048 })), 'limits.memoryMiB')
  assert.is(await refused(req({ cpus: 5 })), 'limits.cpus')
  assert.is(await refused(req({ backend: 'container', diskMiB: 1024 })), 'limits.diskMiB')
  // Each size fits some node, no node fits both.
  assert.is(await refused(req({ cpus: 3, memoryMiB: 1000 })), 'limits')
  assert.is(await place(shard, req({ cpus: 3, memoryMiB: 500 })), 'wide')
  // No joined node offers microvm: no wait brings room, so it is refused at once, naming the backend.
  const startedAt = Date.now()
  const unsupported = await place(shard, req({ backend: 'microvm' }), 4000).catch((e: unknown) => e)
  assert.ok(isWarrenError(unsupported, ErrorCodes.UNSUPPORTED), String(unsupported))
  assert.equal(unsupported.details, { field: 'backend', backend: 'microvm' })
  assert.match(unsupported.message, /microvm/)
  assert.ok(Date.now() - startedAt < 2000, 'refused without waiting for the deadline')
  shard.tell({ type: 'node-up', id: 'vm', capacity: cap({ backends: ['microvm'] }) })
  assert.is(await place(shard, req({ backend: 'microvm' })), 'vm')
}))

test('with no node joined yet a request waits: the first node to join takes it', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  const waiting = place(shard, req({ backend: 'microvm' }), 4000)
  waiting.catch(() => {})
  await waitFor(async () => (await shard.ask<ShardStats>({ type: 'stats' })).waiting === 1, 2000, 'the request to wait')
  shard.tell({ type: 'node-up', id: 'vm', capacity: cap({ backends: ['microvm'] }) })
  assert.is(await waiting, 'vm')
}))

test('per-backend caps are respected', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  shard.tell({ type: 'node-up', id: 'n', capacity: cap({ cpus: 100, maxSandboxes: { function: 2 } }) })
  await place(shard, req())
  await place(shard, req())
  assert.ok(isWarrenError(await place(shard, req()).catch((e: unknown) => e), ErrorCodes.NO_CAPACITY))
}))

test('a request waits for capacity and is placed when a sandbox is released', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  shard.tell({ type: 'node-up', id: 'n', capacity: cap({ cpus: 1 }) })
  assert.is(await place(shard, req()), 'n')
  const waiting = place(shard, req(), 4000)
  waiting.catch(() => {}) // awaited below; this only keeps an early failure from crashing the file
  await waitFor(async () => (await shard.ask<ShardStats>({ type: 'stats' })).waiting === 1, 2000, 'the request to wait')
  shard.tell({ type: 'release', nodeId: 'n', req: req() })
  assert.is(await waiting, 'n')
}))

test('a lost node is never chosen; a rejoined one is', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  shard.tell({ type: 'node-up', id: 'a', capacity: cap({ cpus: 1000, memoryMiB: 1e6 }) })
  shard.tell({ type: 'node-up', id: 'b', capacity: cap({ cpus: 1000, memoryMiB: 1e6 }) })
  shard.tell({ type: 'node-lost', id: 'a' })
  for (let i = 0; i < 50; i++) assert.is(await place(shard, req()), 'b')
  shard.tell({ type: 'node-up', id: 'a', capacity: cap({ cpus: 1000, memoryMiB: 1e6 }) })
  const seen = new Set<string | undefined>()
  for (let i = 0; i < 50; i++) seen.add(await place(shard, req()))
  assert.ok(seen.has('a'))
}))

test('layer locality: a node caching the layers wins over an equally free one', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard({ sampleK: 2 }))
  shard.tell({ type: 'node-up', id: 'cold', capacity: cap({ cpus: 1000, memoryMiB: 1e6 }) })
  shard.tell({ type: 'node-up', id: 'warm', capacity: cap({ cpus: 1000, memoryMiB: 1e6 }), layers: ['sha256:base'] })
  // With no more nodes than sampleK every node is scored, so the warm one wins every time.
  for (let i = 0; i < 40; i++) assert.is(await place(shard, req({ layers: ['sha256:base'] })), 'warm')
}))

test('a memory snapshot goes only to a node restoring its saved machine; one no joined node restores is UNSUPPORTED naming snapshot at once', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shards: Ref<ShardMessage>[] = []
  for (let i = 0; i < 2; i++) shards.push(system.spawn(createPlacementShard({ peers: () => shards })))
  // The freer node runs another machine: a spread-only choice would take it.
  shards[0]!.tell({ type: 'node-up', id: 'kvm', capacity: cap({ cpus: 1000, memoryMiB: 1e6, backends: ['microvm'], machines: ['kvm:host:qemu-7.2'] }) })
  shards[1]!.tell({ type: 'node-up', id: 'tcg', capacity: cap({ cpus: 100, memoryMiB: 1e5, cpuOvercommit: 64, backends: ['microvm'], machines: ['tcg:max:qemu-7.2'] }) })
  for (let i = 0; i < 20; i++) assert.is(await place(shards[0]!, req({ backend: 'microvm', memory: { state: 'sha256:s', machine: 'tcg:max:qemu-7.2' } })), 'tcg')
  // Without a saved machine (a boot, or a snapshot from before it was recorded) either node will do.
  assert.is(await place(shards[0]!, req({ backend: 'microvm' })), 'kvm')
  const startedAt = Date.now()
  const err = await place(shards[0]!, req({ backend: 'microvm', memory: { state: 'sha256:s', machine: 'kvm:host:qemu-9.0' } }), 4000).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.UNSUPPORTED), String(err))
  assert.equal(err.details, { field: 'snapshot', machine: 'kvm:host:qemu-9.0' })
  assert.ok(Date.now() - startedAt < 2000, 'refused without waiting for the deadline')
  // A lost node of that machine may come back: the request waits for it instead.
  shards[1]!.tell({ type: 'node-up', id: 'old', capacity: cap({ backends: ['microvm'], machines: ['kvm:host:qemu-9.0'] }) })
  shards[1]!.tell({ type: 'node-lost', id: 'old' })
  const waiting = place(shards[1]!, req({ backend: 'microvm', memory: { state: 'sha256:s', machine: 'kvm:host:qemu-9.0' } }), 10_000)
  shards[1]!.tell({ type: 'node-up', id: 'old', capacity: cap({ backends: ['microvm'], machines: ['kvm:host:qemu-9.0'] }) })
  assert.is(await waiting, 'old')
}))

test('memory locality: a node holding the saved state wins over an equally free one', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard({ sampleK: 2 }))
  const state = 'sha256:' + 'ab'.repeat(32)
  shard.tell({ type: 'node-up', id: 'cold', capacity: cap({ cpus: 1000, memoryMiB: 1e6, backends: ['microvm'], machines: ['m'] }) })
  shard.tell({ type: 'node-up', id: 'warm', capacity: cap({ cpus: 1000, memoryMiB: 1e6, backends: ['microvm'], machines: ['m'] }), layers: [state] })
  const spec = parseSandboxSpec({ backend: 'microvm' })
  const r = placementRequestOf({ ...spec, memory: { state, vcpus: 1, memoryMiB: 512, machine: 'm' } })
  assert.equal({ layers: r.layers, memory: r.memory }, { layers: [], memory: { state, machine: 'm' } })
  for (let i = 0; i < 20; i++) assert.is(await place(shard, r), 'warm')
}))

test('a shard with no room offers the request to its peers', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shards: Ref<ShardMessage>[] = []
  for (let i = 0; i < 3; i++) shards.push(system.spawn(createPlacementShard({ peers: () => shards })))
  shards[2]!.tell({ type: 'node-up', id: 'far', capacity: cap() })
  assert.is(await place(shards[0]!, req()), 'far')
}))

test('place-now places a batch in one message: what fits gets a node, the rest null', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard())
  shard.tell({ type: 'node-up', id: 'n', capacity: cap({ cpus: 3 }) })
  const ids = await shard.ask<Array<string | null>>({ type: 'place-now', reqs: [req(), req({ cpus: 2 }), req()] })
  assert.equal(ids, ['n', 'n', null])
  const stats = await shard.ask<ShardStats>({ type: 'stats' })
  assert.is(stats.allocatedCpus, 3)
  assert.is(stats.sandboxes, 2)
}))

test('a shard started with recover finds its nodes and what runs on them again', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const shard = system.spawn(createPlacementShard({
    recover: async () => [{ id: 'n', capacity: cap({ cpus: 3 }), layers: ['L'], usage: { cpus: 2, memoryMiB: 512, sandboxes: { function: 2 } } }]
  }))
  await waitFor(async () => (await shard.ask<ShardStats>({ type: 'stats' })).nodes === 1, 2000, 'recovered')
  // 2 of the 3 CPUs are taken by what already runs there: one more fits, not two.
  assert.equal(await shard.ask<Array<string | null>>({ type: 'place-now', reqs: [req(), req()] }), ['n', null])
}))

test.run()
