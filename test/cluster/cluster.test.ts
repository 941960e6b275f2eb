import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { Ref } from '../../src/actors/index.js'
import { CONTROL_PLANE, ControlPlaneDefaults, shardOf, type ControlPlane, type IamMessage, type ShardMessage, type ShardStats } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, QUICK_LOSS, spawnNode, startTestControlPlane } from './harness.js'

function tempDir (defer: (fn: () => unknown) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-test-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A control plane here, one node process `n1`, and a client of tenant `t1`. */
async function clusterWithNode (defer: (fn: () => unknown) => void): Promise<{ cp: ControlPlane, client: Client, token: string }> {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, 'n1', tempDir(defer))
  defer(() => node.kill())
  const token = await cp.createToken('t1', [...ALL_SCOPES])
  const client = await connect({ url: cp.url, token })
  defer(() => client.close())
  return { cp, client, token }
}

test('create, exec, list by label, kill — through real node processes', timed(60_000, async (defer) => {
  const { client } = await clusterWithNode(defer)

  const sb = await client.create({ backend: 'function', ttlMs: 600_000, labels: { run: 'r1' } })
  assert.is(sb.state, 'ready')
  const r = await sb.exec(['js', 'console.log(6*7)'], { timeoutMs: 5000 })
  assert.is(r.exitCode, 0)
  assert.is(r.stdout, '42\n')
  assert.is(r.truncated, false)
  assert.type(r.durationMs, 'number')
  const listed = await client.list({ labels: { run: 'r1' } })
  assert.equal(listed.map((s) => s.id), [sb.id])
  assert.is(listed[0]!.nodeId, 'n1')
  await sb.kill()
  await waitFor(() => sb.state === 'gone', 5000, 'state gone')
  assert.is((await client.list({ labels: { run: 'r1' }, state: 'ready' })).length, 0)
}))

test('bad input: BAD_SPEC names the field, FORBIDDEN without scope, QUOTA over quota, UNAUTHENTICATED closes', timed(60_000, async (defer) => {
  const { cp, client } = await clusterWithNode(defer)

  const bad = await client.create({ backend: 'teleporter' as 'function' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(bad, ErrorCodes.BAD_SPEC))
  assert.is(bad.details?.field, 'backend')
  const badTtl = await client.create({ ttlMs: -5 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(badTtl, ErrorCodes.BAD_SPEC) && badTtl.details?.field === 'ttlMs')

  const reader = await connect({ url: cp.url, token: await cp.createToken('t1', ['sandbox:read']) })
  defer(() => reader.close())
  assert.ok(isWarrenError(await reader.create({}).catch((e: unknown) => e), ErrorCodes.FORBIDDEN))

  const iam = cp.system.lookup<IamMessage>('cp/iam')!
  await iam.ask({ type: 'set-quotas', tenant: 'small', quotas: { maxSandboxes: 2 } })
  const small = await connect({ url: cp.url, token: await cp.createToken('small', [...ALL_SCOPES]) })
  defer(() => small.close())
  await small.createMany(2, {})
  const over = await small.create({}).catch((e: unknown) => e)
  assert.ok(isWarrenError(over, ErrorCodes.QUOTA), String(over))

  const wrong = await connect({ url: cp.url, token: 'wrn_aaaaaaaaaaaa_' + 'x'.repeat(43), connectTimeoutMs: 5000 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(wrong, ErrorCodes.UNAUTHENTICATED), String(wrong))
}))

test('tenant isolation: B cannot see, exec in or kill A\'s sandboxes', timed(60_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, 'n1', tempDir(defer))
  defer(() => node.kill())
  const a = await connect({ url: cp.url, token: await cp.createToken('A', [...ALL_SCOPES]) })
  defer(() => a.close())
  const b = await connect({ url: cp.url, token: await cp.createToken('B', [...ALL_SCOPES]) })
  defer(() => b.close())
  const sb = await a.create({ labels: { owner: 'a' } })
  assert.is((await b.list({})).length, 0)
  for (const attempt of [
    () => b.attach(sb.id),
    () => b.request({ type: 'exec', id: sb.id, execId: 'x1', argv: ['js', '1'] }),
    () => b.request({ type: 'kill', id: sb.id }),
    () => b.request({ type: 'info', id: sb.id })
  ]) {
    const err = await attempt().catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.NOT_FOUND), String(err))
  }
  const never = await b.attach('doesnotexist0000').catch((e: unknown) => e) as Error
  const theirs = await b.attach(sb.id).catch((e: unknown) => e) as Error
  assert.is(theirs.message.replace(sb.id, 'ID'), never.message.replace('doesnotexist0000', 'ID'), 'indistinguishable from a missing id')
  assert.is((await sb.exec(['js', 'console.log("still mine")'])).stdout, 'still mine\n')
}))

test('sandboxes outlive their client; a socket killed mid-exec resumes byte-exact; attach works', timed(90_000, async (defer) => {
  const { cp, client, token } = await clusterWithNode(defer)
  const sb = await client.create({})

  const count = 200
  const size = 16 * 1024
  const expected = createHash('sha256')
  for (let i = 0; i < count; i++) expected.update(new Uint8Array(size).fill(i % 251))
  const got = createHash('sha256')
  let bytes = 0
  let cut = false
  const result = await sb.exec(['stream', String(count), String(size), '5'], {
    timeoutMs: 60_000,
    onStdout: (chunk) => {
      got.update(chunk)
      bytes += chunk.byteLength
      if (!cut && bytes > (count * size) / 3) {
        cut = true
        client.link.socket?.terminate() // the TCP connection dies; the link reconnects and resumes
      }
    }
  })
  assert.ok(cut, 'the socket was cut mid-stream')
  assert.is(result.exitCode, 0)
  assert.is(bytes, count * size)
  assert.is(got.digest('hex'), expected.digest('hex'))

  await client.close()
  const again = await connect({ url: cp.url, token })
  defer(() => again.close())
  const found = await again.attach(sb.id)
  assert.is(found.state, 'ready')
  assert.is((await found.exec(['js', 'console.log("alive")'])).stdout, 'alive\n')
}))

test('kill -9 a node: its sandboxes are lost within the heartbeat timeout, nothing lands on it; restarted, it rejoins', timed(90_000, async (defer) => {
  const cp = await startTestControlPlane(QUICK_LOSS)
  defer(() => cp.close())
  const dir = tempDir(defer)
  const n1 = await spawnNode(cp, 'n1', join(dir, 'n1'))
  defer(() => n1.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sbs = await client.createMany(5, {})
  assert.ok(sbs.every((s) => s.state === 'ready'))

  const killedAt = Date.now()
  await n1.kill('SIGKILL')
  await waitFor(() => sbs.every((s) => s.state === 'lost'), 10_000, 'sandboxes reported lost')
  const tookMs = Date.now() - killedAt
  assert.ok(tookMs < 1500 + 2000, `lost after ${tookMs} ms`) // timeout plus the registry's check period and delivery
  const none = await client.create({ deadlineMs: 200 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(none, ErrorCodes.NO_CAPACITY), String(none))

  const n1again = await spawnNode(cp, 'n1', join(dir, 'n1'))
  defer(() => n1again.kill())
  const fresh = await client.create({})
  assert.is((await fresh.info()).nodeId, 'n1')
  assert.is((await fresh.exec(['js', 'console.log("back")'])).stdout, 'back\n')
}))

test('a killed placement shard is restarted and recovers its nodes and their sandboxes from registry and directory', timed(60_000, async (defer) => {
  const { cp, client } = await clusterWithNode(defer)
  for (let i = 0; i < 3; i++) await client.create({ backend: 'function', ttlMs: 600_000 })
  const name = `${CONTROL_PLANE}/shard-${shardOf('n1', ControlPlaneDefaults.shards)}`
  const before = cp.system.lookup<ShardMessage>(name)!
  assert.is((await before.ask<ShardStats>({ type: 'stats' })).sandboxes, 3)
  cp.system.kill(before)
  let after: Ref<ShardMessage> | undefined
  await waitFor(async () => {
    after = cp.system.lookup<ShardMessage>(name)
    if (after === undefined || after === before) return false
    return (await after.ask<ShardStats>({ type: 'stats' })).nodes === 1
  }, 10_000, 'shard restarted with its node')
  const stats = await after!.ask<ShardStats>({ type: 'stats' })
  assert.is(stats.sandboxes, 3, 'what runs on the node is reserved again')
  const sb = await client.create({ backend: 'function', ttlMs: 600_000 })
  assert.is(sb.state, 'ready')
}))

test('TTL ends a sandbox with reason ttl; exec on it then says SANDBOX_GONE', timed(30_000, async (defer) => {
  const { client } = await clusterWithNode(defer)
  const sb = await client.create({ ttlMs: 300 })
  await waitFor(() => sb.state === 'gone', 10_000, 'ttl expiry')
  assert.is((await sb.info()).reason, 'ttl')
  assert.ok(isWarrenError(await sb.exec(['js', '1']).catch((e: unknown) => e), ErrorCodes.SANDBOX_GONE))
}))

test('client.worker(): the client in a worker thread through comlink', timed(60_000, async (defer) => {
  const { client } = await clusterWithNode(defer)
  const w = await client.worker()
  defer(() => w.terminate())
  const view = await w.api.create({ labels: { via: 'worker' } })
  const r = await w.api.exec(view.id, ['js', 'console.log(2+3)'])
  assert.is(r.stdout, '5\n')
  assert.is((await client.attach(view.id)).state, 'ready')
}))

test.run()
