/** The snapshot table: names unique among a tenant's live snapshots, tenants apart, deletes, and what the collector reads. */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isSnapshotId, parseSandboxSpec, SnapshotStore, type SnapshotRecord } from '../../../src/cluster/index.js'
import { openState } from '../../../src/state/index.js'

const spec = parseSandboxSpec({ backend: 'container' })
const digest = (i: number): string => `sha256:${i.toString(16).padStart(64, '0')}`

function snap (id: number, tenant: string, layers: string[], name?: string): SnapshotRecord {
  return { id: `snap-${String(id).padStart(16, '0')}`, tenant, sandboxId: 'sb', backend: 'container', layers, bytes: 10, createdAt: id, spec: { ...spec, image: { base: 'busybox', diffs: layers.slice(1) } }, ...(name !== undefined ? { name } : {}) }
}

test('a name moves to the newest snapshot of it; tenants never see each other\'s; a delete frees the name', () => {
  const state = openState(undefined)
  try {
    const store = new SnapshotStore(state.db)
    store.put(snap(1, 'a', ['busybox', digest(1)], 'task:v1'))
    store.put(snap(2, 'a', ['busybox', digest(2)], 'task:v1'))
    store.put(snap(3, 'b', ['busybox', digest(3)], 'task:v1'))
    assert.is(store.get('a', 'task:v1')?.id, snap(2, 'a', []).id)
    assert.is(store.get('a', snap(1, 'a', []).id)?.name, undefined, 'the older one lost the name')
    assert.is(store.get('b', 'task:v1')?.id, snap(3, 'b', []).id)
    assert.is(store.get('b', snap(1, 'a', []).id), undefined, 'another tenant\'s id is unknown')
    assert.equal(store.list('a', 10).map((r) => r.createdAt), [2, 1], 'newest first')
    assert.equal(store.list('a', 1).length, 1)
    assert.equal(store.list('a', 10, 'other-sandbox'), [])
    assert.equal(store.get('a', 'task:v1')?.spec.image?.diffs, [digest(2)], 'the spec round-trips')
    assert.is(store.count('a'), 2)

    assert.is(store.delete('b', 'task:v1')?.id, snap(3, 'b', []).id)
    assert.is(store.get('b', 'task:v1'), undefined)
    assert.is(store.delete('b', 'task:v1'), undefined, 'deleted once')
    assert.ok(store.getAny(snap(3, 'b', []).id)?.deletedAt !== undefined, 'the row stays until purged')
    store.put(snap(4, 'b', ['busybox', digest(4)], 'task:v1'))
    assert.is(store.get('b', 'task:v1')?.id, snap(4, 'b', []).id, 'the name is free again')
    assert.equal([...store.liveLayers()].sort(), ['busybox', digest(1), digest(2), digest(4)])
    assert.equal(store.deleted(10).map((r) => r.id), [snap(3, 'b', []).id])
    store.purge(snap(3, 'b', []).id)
    assert.equal(store.deleted(10), [])
    assert.is(store.getAny(snap(3, 'b', []).id), undefined)
  } finally {
    state.close()
  }
})

test('snapshot ids are snap- and 16 of [0-9a-z]', () => {
  assert.ok(isSnapshotId('snap-0123456789abcdef'))
  assert.not.ok(isSnapshotId('snap-0123456789ABCDEF'))
  assert.not.ok(isSnapshotId('snap-0123'))
  assert.not.ok(isSnapshotId('task:v1'))
})

test.run()
