/**
 * Snapshots through the public SDK against a real cluster (a control plane with a data dir,
 * so a blob store, and container nodes in this process): a file written before a snapshot is in
 * every fork and a later change in one fork is in no other; a snapshot of a fork stacks one
 * more layer until `maxDiffs`, then flattens; a create from a snapshot by name; hibernate and
 * resume (same id, files kept, processes not, on another node when its own is gone); delete and
 * the collector; another tenant's snapshot; the fields at their bounds.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode, type ControlPlane, type NodeProcess } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type ErrorCode, type WarrenError } from '../../src/errors.js'
import { storePaths } from '../../src/images/blob/index.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../cluster/harness.js'
import { timed, waitFor } from '../support/index.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`sdk snapshot tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const SPEC = { backend: 'container' as const, limits: { memoryMiB: 128, cpus: 0.25, diskMiB: 512 } }

async function refused (p: Promise<unknown>, code: ErrorCode, field?: string): Promise<Error> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code), `expected ${code}, got ${String(err)}`)
  if (field !== undefined) assert.is((err.details as { field?: unknown } | undefined)?.field, field, `field of ${String(err)}`)
  return err
}

interface Cluster { dir: string, cp: ControlPlane, node: NodeProcess, client: Client, other: Client, blobs: string }

/** A control plane with a blob store (maxDiffs 2), one container node, a tenant's client and another tenant's. */
async function cluster (defer: (fn: () => unknown) => void, nodeId = 'snap', maxPerTenant?: number): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-snapshots-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 15_000, dataDir: join(dir, 'cp'), snapshots: { maxDiffs: 2, ...(maxPerTenant !== undefined ? { maxPerTenant } : {}) } })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId, dataDir: join(dir, nodeId), containerPool: { max: 0 } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  const other = await connect({ url: cp.url, token: await cp.createToken('tenant-b', [...ALL_SCOPES]) })
  defer(() => other.close())
  return { dir, cp, node, client, other, blobs: join(dir, 'cp', 'blobs') }
}

const cat = async (sb: Sandbox, path: string): Promise<string> => (await sb.exec(['cat', path])).stdout

ctest('a file written before a snapshot is in every fork; a change in one fork is in no other', timed(180_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  assert.is((await sb.exec('mkdir -p /work && echo before > /work/f')).exitCode, 0)
  const { snapshot, sandboxes, outcomes } = await sb.fork(3, { labels: { fork: 'yes' } })
  for (const f of sandboxes) defer(() => f.kill())
  assert.is(outcomes.length, 3)
  assert.ok(outcomes.every((o) => o.ok), outcomes.map((o) => o.ok ? "ok" : `${o.error.code}: ${o.error.message}`).join("; "))
  assert.equal(snapshot.layers.length, 2, 'busybox and the new layer')
  assert.is(snapshot.layers[0], 'busybox')
  assert.match(snapshot.layers[1]!, /^sha256:[0-9a-f]{64}$/)
  assert.is(snapshot.sandboxId, sb.id)
  for (const f of sandboxes) {
    assert.is(await cat(f, '/work/f'), 'before\n')
    assert.is(f.labels.fork, 'yes')
  }
  assert.is((await sandboxes[0]!.exec('echo changed > /work/f && echo mine > /work/g')).exitCode, 0)
  assert.is(await cat(sandboxes[0]!, '/work/f'), 'changed\n')
  for (const f of [sb, ...sandboxes.slice(1)]) {
    assert.is(await cat(f, '/work/f'), 'before\n')
    assert.is((await f.exec(['test', '-e', '/work/g'])).exitCode, 1)
  }
  const listed = await client.snapshots({ sandboxId: sb.id })
  assert.equal(listed.map((s) => s.id), [snapshot.id])
}))


ctest('a snapshot of a fork stacks one more layer, and past maxDiffs it flattens into one that stands alone', timed(180_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  await sb.exec('echo 1 > /one')
  const s1 = await sb.snapshot()
  assert.is(s1.parent, undefined)
  const f1 = await client.create({ snapshot: s1.id })
  defer(() => f1.kill())
  await f1.exec('echo 2 > /two')
  const s2 = await f1.snapshot()
  assert.equal(s2.layers.slice(0, 2), s1.layers, 'the fork\'s stack, then its own layer')
  assert.is(s2.layers.length, 3)
  assert.is(s2.parent, s1.id)
  const f2 = await client.create({ snapshot: s2.id })
  defer(() => f2.kill())
  await f2.exec('echo 3 > /three && rm /one')
  // f2 stacks two diffs: the bound (2 here), so its snapshot is one flattened layer.
  const s3 = await f2.snapshot()
  assert.is(s3.layers.length, 1)
  assert.match(s3.layers[0]!, /^sha256:/)
  assert.ok(!s2.layers.includes(s3.layers[0]!))
  assert.is(s3.parent, s2.id)
  const f3 = await client.create({ snapshot: s3.id })
  defer(() => f3.kill())
  const r = await f3.exec('cat /two /three; test -e /one || echo no-one; busybox true && echo busybox')
  assert.is(r.stdout, '2\n3\nno-one\nbusybox\n')
  // And it stacks again from there.
  await f3.exec('echo 4 > /four')
  const s4 = await f3.snapshot()
  assert.equal(s4.layers.slice(0, 1), s3.layers)
  assert.is(s4.layers.length, 2)
}))

ctest('create from a snapshot by name: its files and its spec, the given fields laid over; a new snapshot of the name moves it', timed(180_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create({ ...SPEC, labels: { task: 't1', keep: 'k' }, env: { A: 'a' } })
  defer(() => sb.kill())
  await sb.exec('echo v1 > /version')
  const v1 = await sb.snapshot({ name: 'task:latest' })
  assert.is(v1.name, 'task:latest')
  const a = await client.create({ snapshot: 'task:latest', labels: { task: 't2' }, env: { B: 'b' } })
  defer(() => a.kill())
  assert.is(await cat(a, '/version'), 'v1\n')
  const info = await a.info()
  assert.is(info.backend, 'container', 'the snapshot\'s backend')
  assert.equal(info.labels, { task: 't2', keep: 'k' }, 'labels merged key by key')
  assert.is((await a.exec('echo $A$B')).stdout, 'ab\n')
  await sb.exec('echo v2 > /version')
  const v2 = await sb.snapshot({ name: 'task:latest' })
  const b = await client.create({ snapshot: 'task:latest' })
  defer(() => b.kill())
  assert.is(await cat(b, '/version'), 'v2\n')
  const named = (await client.snapshots()).filter((s) => s.name === 'task:latest')
  assert.equal(named.map((s) => s.id), [v2.id], 'the name moved')
  assert.ok((await client.snapshots()).some((s) => s.id === v1.id && s.name === undefined), 'the old one stays, unnamed')
}))

ctest('hibernate: state hibernated, no node or quota held; resume: same id, files kept, processes not', timed(180_000, async (defer) => {
  const { cp, client } = await cluster(defer)
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']) })
  defer(() => admin.close())
  await admin.quotas('tenant-a', { maxSandboxes: 1 })
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  await sb.exec('echo kept > /state && (sleep 1000 >/dev/null 2>&1 &) && sleep 0.1')
  assert.match((await sb.exec('ps')).stdout, /sleep 1000/)
  await refused(client.create(SPEC), ErrorCodes.QUOTA)
  const again = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => again.close())
  // Hibernated twice at once, by this handle and by another client: one snapshot is cut, and both
  // answer hibernated (was: the second NOT_FOUND or SANDBOX_GONE, or a second snapshot left behind).
  const [view, twin] = await Promise.all([sb.hibernate(), (await again.attach(sb.id)).hibernate()])
  assert.is(view.state, 'hibernated')
  assert.equal(twin, view)
  assert.equal((await client.snapshots({ sandboxId: sb.id })).map((s) => s.id), [view.snapshot])
  assert.match(view.snapshot!, /^snap-[0-9a-z]{16}$/)
  assert.is(sb.state, 'hibernated')
  assert.equal((await client.list({ state: 'hibernated' })).map((v) => v.id), [sb.id])
  assert.ok((await client.list()).some((v) => v.id === sb.id), 'a hibernated sandbox is listed as not ended')
  const err = await refused(sb.exec('true'), ErrorCodes.SANDBOX_PAUSED)
  assert.is((err as { details?: { state?: string } }).details?.state, 'hibernated')
  await refused(sb.files.read('/state'), ErrorCodes.SANDBOX_PAUSED)
  await refused(sb.snapshot(), ErrorCodes.SANDBOX_PAUSED)
  await refused(sb.pause(), ErrorCodes.SANDBOX_PAUSED)
  assert.equal(await sb.hibernate(), view, 'a second hibernate answers as it is')
  // Its quota is free: another sandbox fits, and goes, and the slot is free again.
  const other = await client.create(SPEC)
  await other.kill()
  // Resumed twice at once, by this handle and by attaching from another client: one makes it, both
  // answer ready (was: the second INTERNAL); the same id, its files, none of its processes.
  const [resumed, back] = await Promise.all([sb.resume(), again.attach(sb.id)])
  assert.is(resumed.state, 'ready')
  assert.is(back.id, sb.id)
  assert.is((await back.info()).state, 'ready')
  assert.is((await back.info()).snapshot, undefined)
  assert.is(await cat(back, '/state'), 'kept\n')
  assert.not.match((await back.exec('ps')).stdout, /sleep 1000/)
  assert.is((await back.exec('hostname')).stdout, `${sb.id}\n`, 'the same id, the same hostname')
  await waitFor(() => sb.state === 'ready', 5000, 'the first handle to hear of the resume')
  // Back to holding its quota.
  await refused(client.create(SPEC), ErrorCodes.QUOTA)
  await sb.kill()
  assert.is(sb.state, 'gone')
  // One trajectory across both lives: numbered on without a gap, the snapshot it hibernated through a step of it.
  await waitFor(async () => (await client.trajectory(sb.id)).complete, 15_000, 'the trajectory complete')
  const page = await client.trajectory(sb.id)
  assert.is(page.header?.sandboxId, sb.id)
  assert.equal(page.steps.map((s) => s.seq), page.steps.map((_, i) => i))
  const kinds = page.steps.map((s) => s.kind === 'exec' ? s.argv.at(-1) : s.kind)
  assert.equal(kinds, ['echo kept > /state && (sleep 1000 >/dev/null 2>&1 &) && sleep 0.1', 'ps', 'snapshot', '/state', 'ps', 'hostname'])
  const snap = page.steps[2]
  assert.ok(snap?.kind === 'snapshot' && snap.snapshot === view.snapshot, JSON.stringify(snap))
}))

ctest('a hibernated sandbox resumes on another node when its own is gone (its layers load from the blob store); a kill ends a hibernated one for good', timed(180_000, async (defer) => {
  const { dir, cp, node, client } = await cluster(defer, 'first')
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  await sb.exec('mkdir -p /data && seq 1 20000 > /data/n')
  await sb.hibernate()
  await node.close()
  const second = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'second', dataDir: join(dir, 'second'), containerPool: { max: 0 } })
  defer(() => second.close())
  const view = await sb.resume()
  assert.is(view.state, 'ready')
  assert.is(view.nodeId, 'second')
  assert.is((await sb.exec('wc -l < /data/n')).stdout.trim(), '20000')

  const gone = await client.create(SPEC)
  defer(() => gone.kill())
  await gone.hibernate()
  await gone.kill()
  assert.is((await gone.info()).state, 'gone')
  assert.is((await gone.info()).reason, 'killed')
  await refused(gone.resume(), ErrorCodes.SANDBOX_GONE)

  // One whose TTL ran out while it slept is not made again (was: ready, past its end, then killed).
  const brief = await client.create({ ...SPEC, ttlMs: 4000 })
  defer(() => brief.kill())
  const slept = await brief.hibernate()
  await waitFor(() => Date.now() > slept.expiresAt, 10_000, 'its TTL to pass')
  const late = await refused(brief.resume(), ErrorCodes.SANDBOX_GONE)
  assert.is((late as { details?: { reason?: string } }).details?.reason, 'ttl')
  // And what it says next agrees (was: hibernated until the directory's next sweep).
  const after = await brief.info()
  assert.equal([after.state, after.reason], ['gone', 'ttl'])
}))

/** The collector, run now (it also runs after each delete and every minute). */
async function collect (cp: ControlPlane): Promise<string[]> {
  return await cp.system.lookup<{ type: 'gc' }>('cp/snapshots')!.ask<string[]>({ type: 'gc' }, { timeoutMs: 30_000 })
}

ctest('delete: the snapshot\'s layer leaves the blob store once unused, and stays while a sandbox made from it lives', timed(180_000, async (defer) => {
  const { cp, client, blobs } = await cluster(defer)
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  await sb.exec('echo x > /x')
  const s = await sb.snapshot({ name: 'gc:one' })
  const layer = s.layers[1]!
  assert.ok(existsSync(storePaths(blobs, layer).blob), 'the layer is in the blob store')
  const user = await client.create({ snapshot: s.id })
  defer(() => user.kill())
  assert.equal(await client.deleteSnapshot('gc:one'), { id: s.id, deleted: true })
  await refused(client.create({ snapshot: s.id }), ErrorCodes.BAD_SPEC, 'snapshot')
  await refused(client.create({ snapshot: 'gc:one' }), ErrorCodes.BAD_SPEC, 'snapshot')
  await refused(client.deleteSnapshot(s.id), ErrorCodes.NOT_FOUND, 'id')
  assert.equal(await collect(cp), [])
  assert.ok(existsSync(storePaths(blobs, layer).blob), 'kept while a sandbox stacks it')
  assert.is(await cat(user, '/x'), 'x\n')
  await user.kill()
  assert.equal(await collect(cp), [layer])
  assert.not.ok(existsSync(storePaths(blobs, layer).blob))
  assert.not.ok(existsSync(storePaths(blobs, layer).manifest))

  // Unused from the start: the delete's own sweep takes it.
  const t = await sb.snapshot()
  assert.ok(existsSync(storePaths(blobs, t.layers[1]!).blob))
  await client.deleteSnapshot(t.id)
  await waitFor(() => !existsSync(storePaths(blobs, t.layers[1]!).blob), 10_000, 'the layer to go')
  assert.equal(await client.snapshots(), [])

  // A fork of a sandbox made from a snapshot lists its layer too: it stays until that goes.
  const b = await sb.snapshot()
  const child = await client.create({ snapshot: b.id })
  defer(() => child.kill())
  const { snapshot: f, sandboxes: [fork] } = await child.fork(1)
  defer(() => fork?.kill())
  assert.equal(f.layers.slice(0, 2), b.layers)
  await child.kill()
  await client.deleteSnapshot(b.id)
  assert.equal(await collect(cp), [])
  await fork!.kill()
  assert.equal(await collect(cp), [], 'the fork\'s snapshot still lists it')
  assert.ok(existsSync(storePaths(blobs, b.layers[1]!).blob))
  await client.deleteSnapshot(f.id)
  await waitFor(() => !existsSync(storePaths(blobs, b.layers[1]!).blob) && !existsSync(storePaths(blobs, f.layers[2]!).blob), 10_000, 'both layers to go')
}))

ctest('another tenant\'s snapshot answers exactly like one that never was; fields at their bounds are refused naming them', timed(180_000, async (defer) => {
  const { client, other } = await cluster(defer)
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  const s = await sb.snapshot({ name: 'mine:v1' })
  const unknownId = 'snap-0000000000000000'
  for (const [ref, missing] of [[s.id, unknownId], ['mine:v1', 'nobody:v1']] as const) {
    const theirs = await refused(other.create({ snapshot: ref }), ErrorCodes.BAD_SPEC, 'snapshot')
    const none = await refused(other.create({ snapshot: missing }), ErrorCodes.BAD_SPEC, 'snapshot')
    assert.is(theirs.message.replace(ref, '?'), none.message.replace(missing, '?'))
    const del = await refused(other.deleteSnapshot(ref), ErrorCodes.NOT_FOUND, 'id')
    const delNone = await refused(other.deleteSnapshot(missing), ErrorCodes.NOT_FOUND, 'id')
    assert.is(del.message.replace(ref, '?'), delNone.message.replace(missing, '?'))
  }
  assert.equal(await other.snapshots(), [])
  assert.equal(await other.snapshots({ sandboxId: sb.id }), [])
  await refused(other.request({ type: 'snapshot', id: sb.id }), ErrorCodes.NOT_FOUND)
  await refused(other.request({ type: 'fork', id: sb.id, count: 1 }), ErrorCodes.NOT_FOUND)
  await refused(other.request({ type: 'hibernate', id: sb.id }), ErrorCodes.NOT_FOUND)

  await refused(sb.snapshot({ name: `${'n'.repeat(129)}:t` }), ErrorCodes.INVALID_ARGUMENT, 'name')
  await refused(sb.snapshot({ name: `n:${'t'.repeat(65)}` }), ErrorCodes.INVALID_ARGUMENT, 'name')
  await refused(sb.snapshot({ name: 'no-tag' }), ErrorCodes.INVALID_ARGUMENT, 'name')
  await refused(sb.fork(0), ErrorCodes.INVALID_ARGUMENT, 'count')
  await refused(sb.fork(1001), ErrorCodes.INVALID_ARGUMENT, 'count')
  await refused(sb.fork(1.5), ErrorCodes.INVALID_ARGUMENT, 'count')
  await refused(sb.fork(1, { ttlMs: -1 }), ErrorCodes.BAD_SPEC, 'ttlMs')
  await refused(sb.fork(1, { backend: 'function' }), ErrorCodes.BAD_SPEC, 'backend')
  await refused(sb.fork(1, { nonsense: 1 } as never), ErrorCodes.BAD_SPEC, 'nonsense')
  // A fork no node could ever hold makes nothing, and leaves no snapshot behind.
  const before = (await client.snapshots()).map((x) => x.id)
  await refused(sb.fork(2, { limits: { memoryMiB: 1024 * 1024 } }), ErrorCodes.NO_CAPACITY, 'limits.memoryMiB')
  assert.equal((await client.snapshots()).map((x) => x.id), before)
  await refused(client.request({ type: 'fork', id: sb.id, count: 1, spec: 'garbage' }), ErrorCodes.BAD_SPEC, '')
  await refused(client.create({ snapshot: 'not a ref' }), ErrorCodes.BAD_SPEC, 'snapshot')
  await refused(client.create({ snapshot: s.id, image: { base: 'busybox' } }), ErrorCodes.BAD_SPEC, 'image')
  await refused(client.create({ backend: 'container', image: { base: 'busybox', diffs: [s.layers[1]!] } as never }), ErrorCodes.BAD_SPEC, 'image.diffs')
  await refused(client.create({ snapshot: s.id, limits: { memoryMiB: -5 } }), ErrorCodes.BAD_SPEC, 'limits.memoryMiB')
  await refused(client.request({ type: 'snapshots', limit: 0 }), ErrorCodes.INVALID_ARGUMENT, 'limit')
  await refused(client.request({ type: 'snapshot-delete', id: '' }), ErrorCodes.INVALID_ARGUMENT, 'id')
  const fn = await client.create({ backend: 'function' })
  await refused(fn.snapshot(), ErrorCodes.UNSUPPORTED, 'backend')
  // Nothing above made a snapshot or a sandbox.
  assert.equal((await client.snapshots()).map((x) => x.id), [s.id])
  assert.is((await client.list()).length, 2)
}))

ctest('fork(100) of a real sandbox makes 100 sandboxes with its files (timed beside createMany(100) from the base)', timed(600_000, async (defer) => {
  const { client } = await cluster(defer)
  const small = { backend: 'container' as const, limits: { memoryMiB: 32, cpus: 0.01, diskMiB: 256 } }
  const sb = await client.create(small)
  defer(() => sb.kill())
  await sb.exec('mkdir -p /task && dd if=/dev/urandom of=/task/blob bs=1M count=8 2>/dev/null && sha256sum /task/blob > /task/sum')
  const sum = await cat(sb, '/task/sum')

  let t = Date.now()
  const base = await client.createMany(100, { ...small, deadlineMs: 120_000 })
  const createManyMs = Date.now() - t
  defer(() => client.kill(base.map((b) => b.id)))
  await client.kill(base.map((b) => b.id))

  t = Date.now()
  await sb.snapshot()
  const snapshotMs = Date.now() - t
  t = Date.now()
  const { snapshot, sandboxes, outcomes } = await sb.fork(100, { deadlineMs: 120_000 })
  const forkMs = Date.now() - t
  defer(() => client.kill(sandboxes.map((f) => f.id)))
  assert.is(outcomes.filter((o) => o.ok).length, 100, outcomes.filter((o) => !o.ok).map((o) => o.ok ? '' : o.error.message).slice(0, 3).join('; '))
  for (const f of [sandboxes[0]!, sandboxes[49]!, sandboxes[99]!]) {
    assert.is((await f.exec('sha256sum -c /task/sum >/dev/null && cat /task/sum')).stdout, sum)
  }
  console.log(`fork(100): ${forkMs} ms (its snapshot of ${snapshot.bytes} bytes included; one snapshot alone: ${snapshotMs} ms); createMany(100) from the base: ${createManyMs} ms`)
}))

ctest('a tenant at its bound of snapshots is refused the next one with QUOTA naming the quota; a deleted one makes room; another tenant is not bound by it', timed(120_000, async (defer) => {
  const { client, other } = await cluster(defer, 'snapq', 1)
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  const first = await sb.snapshot()
  const refusal = await refused(sb.snapshot(), ErrorCodes.QUOTA) as WarrenError
  assert.equal([refusal.details?.quota, refusal.details?.max], ['snapshots', 1])
  await client.deleteSnapshot(first.id)
  await sb.snapshot()
  const theirs = await other.create(SPEC)
  defer(() => theirs.kill())
  await theirs.snapshot()
}))

test.run()
