/**
 * The control plane's log under a real cluster: a crashing placement shard and a refused
 * request each logged once, with their cause, through a destination the test captures.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode } from '../../../src/cluster/index.js'
import { createLogger } from '../../../src/log/index.js'
import { connect } from '../../../src/sdk/index.js'
import { timed, waitFor } from '../../support/index.js'
import { captureLog as capture } from '../../support/log-capture.js'
import { functionsDir, startTestControlPlane } from '../harness.js'

test('a crashing placement shard is logged once with its cause, and its restart once; a refused request with its code, type, tenant and key id, never the key', timed(30_000, async (defer) => {
  const out = capture()
  const cp = await startTestControlPlane({ logger: createLogger({ level: 'info', destination: out }) })
  defer(() => cp.close())
  const nodeOut = capture()
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'logs-1', functionsDir, logger: createLogger({ level: 'info', destination: nodeOut }) })
  let closed = false
  defer(async () => { if (!closed) await node.close() })
  await waitFor(() => out.records().some((r) => r.msg === 'node joined' && r.node === 'logs-1'), 5000, 'the join logged')
  assert.ok(nodeOut.records().some((r) => r.msg === 'node agent started' && r.node === 'logs-1' && r.adopted === 0), JSON.stringify(nodeOut.records()))

  // A shard that throws (here a message it cannot read; in the field, a bug): a failure and a restart.
  cp.system.lookup('cp/shard-1')!.tell({ type: 'recovered', nodes: null })
  await waitFor(() => out.records().some((r) => r.msg === 'supervisor restarted a child'), 5000, 'the restart logged')
  await waitFor(() => cp.system.lookup('cp/shard-1'), 5000, 'the shard back')
  const failed = out.records().filter((r) => r.msg === 'actor failed')
  assert.is(failed.length, 1, JSON.stringify(failed))
  assert.equal([failed[0]!.level, failed[0]!.actor, failed[0]!.shard, failed[0]!.err.type], ['error', 'cp/shard-1', 1, 'TypeError'])
  assert.match(failed[0]!.err.message, /not iterable/)
  const restarts = out.records().filter((r) => r.msg === 'supervisor restarted a child')
  assert.is(restarts.length, 1)
  assert.equal([restarts[0]!.supervisor, restarts[0]!.child, restarts[0]!.shard], ['cp/placement', 'shard-1', 1])

  const key = await cp.createToken('tenant-l', ['sandbox:create', 'sandbox:read'])
  const client = await connect({ url: cp.url, token: key })
  defer(() => client.close())
  const sb = await client.create({ backend: 'function', ttlMs: 60_000 })
  // No sandbox:exec: refused FORBIDDEN, logged once naming the scope's refusal.
  const err = await sb.exec(['js', '1']).then(() => undefined, (e: unknown) => e as { code?: string })
  assert.is(err?.code, 'WARREN_ERR_FORBIDDEN')
  const spec = await client.create({ backend: 'function', limits: { cpus: -1 } } as never).then(() => undefined, (e: unknown) => e as { code?: string })
  assert.is(spec?.code, 'WARREN_ERR_BAD_SPEC')
  await waitFor(() => out.records().filter((r) => r.msg === 'request refused').length >= 2, 5000, 'the refusals logged')
  const refused = out.records().filter((r) => r.msg === 'request refused')
  assert.is(refused.length, 2, JSON.stringify(refused))
  const keyId = /^wrn_([0-9a-z]{12})_/.exec(key)![1]
  assert.equal([refused[0]!.code, refused[0]!.type, refused[0]!.tenant, refused[0]!.keyId, refused[0]!.sandbox, refused[0]!.level], ['WARREN_ERR_FORBIDDEN', 'exec', 'tenant-l', keyId, sb.id, 'info'])
  assert.equal([refused[1]!.code, refused[1]!.type, refused[1]!.field], ['WARREN_ERR_BAD_SPEC', 'create', 'limits.cpus'])
  assert.not.match(out.lines.join(''), new RegExp(key.slice(18)), 'the key\'s secret is never logged')

  // A key that is not one (here: a made-up secret for a real key id) is refused at the handshake, logged with the key id only.
  const forged = `${key.slice(0, 17)}${'A'.repeat(43)}`
  const e = await connect({ url: cp.url, token: forged, connectTimeoutMs: 3000 }).then(async (c) => { await c.close(); return undefined }, (err: unknown) => err as { code?: string })
  assert.is(e?.code, 'WARREN_ERR_UNAUTHENTICATED')
  await waitFor(() => out.records().some((r) => r.msg === 'authentication refused'), 5000, 'the refusal logged')
  const auth = out.records().filter((r) => r.msg === 'authentication refused')
  assert.equal([auth.length, auth[0]!.keyId, auth[0]!.code], [1, keyId, 'WARREN_ERR_UNAUTHENTICATED'])
  assert.not.match(out.lines.join(''), /AAAAAAAAAAAAAAAAAAAA/)

  // A node that leaves is lost with that cause; the same node back is a rejoin.
  closed = true
  await node.close()
  await waitFor(() => out.records().some((r) => r.msg === 'node lost'), 5000, 'the loss logged')
  const lost = out.records().filter((r) => r.msg === 'node lost')
  assert.equal([lost.length, lost[0]!.node, lost[0]!.level], [1, 'logs-1', 'info'])
  assert.match(lost[0]!.cause, /left/)
  const again = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'logs-1', functionsDir })
  defer(() => again.close())
  await waitFor(() => out.records().some((r) => r.msg === 'node rejoined'), 5000, 'the rejoin logged')
  assert.is(out.records().filter((r) => r.msg === 'node rejoined' && r.node === 'logs-1').length, 1)
}))

test.run()
