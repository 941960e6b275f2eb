/**
 * The audit log through the public API: what tenants and admins do is recorded with principal,
 * ids, time and outcome, in order, refusals too; only an admin key reads it, and every field of
 * the query is checked at and past its bounds.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode, type AuditRecord } from '../../../src/cluster/index.js'
import { isWarrenError } from '../../../src/errors.js'
import { connect, type Client } from '../../../src/sdk/index.js'
import { timed } from '../../support/index.js'
import { functionsDir, startTestControlPlane } from '../harness.js'

const keyIdOf = (key: string): string => /^wrn_([0-9a-z]{12})_/.exec(key)![1]!

async function refusal (p: Promise<unknown>): Promise<{ code?: string, details?: Record<string, unknown> }> {
  return await p.then(() => { throw new Error('expected a refusal') }, (e: unknown) => e as { code?: string, details?: Record<string, unknown> })
}

test('create, exec, kill and a token create are audited in order with principal, ids and outcome; a refused create with its code; only admins read it', timed(40_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-audit-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'audit-1', functionsDir })
  defer(() => node.close())
  const adminKey = await cp.createToken('ops', ['admin'])
  const admin = await connect({ url: cp.url, token: adminKey })
  defer(() => admin.close())
  const tenantKey = await cp.createToken('team-a', ['sandbox:create', 'sandbox:exec', 'sandbox:read'])
  const tenant: Client = await connect({ url: cp.url, token: tenantKey })
  defer(() => tenant.close())

  const sb = await tenant.create({ backend: 'function', ttlMs: 60_000 })
  const r = await sb.exec(['js', `console.log(${JSON.stringify('x'.repeat(2000))}.length)`], { stdin: new TextEncoder().encode('secret-stdin') })
  assert.is(r.exitCode, 0)
  await sb.kill()
  const newKey = await admin.createToken('team-b', ['sandbox:read'])
  await admin.quotas('team-a', { maxSandboxes: 1 })
  const quota = await refusal(tenant.createMany(2, { backend: 'function' }))
  assert.is(quota.code, 'WARREN_ERR_QUOTA')

  const page = await admin.audit({})
  const mine = page.records.filter((x) => x.tenant === 'team-a' || x.tenant === 'ops')
  assert.equal(mine.map((x) => `${x.action} ${x.outcome}`), [
    'sandbox.create ok', 'exec ok', 'sandbox.kill ok', 'token.create ok', 'quota.set ok', 'sandbox.create WARREN_ERR_QUOTA'
  ])
  const [create, exec, kill, token, quotas, refused] = mine as [AuditRecord, AuditRecord, AuditRecord, AuditRecord, AuditRecord, AuditRecord]
  assert.equal([create.tenant, create.keyId, create.sandbox], ['team-a', keyIdOf(tenantKey), sb.id])
  assert.equal([exec.sandbox, exec.argv![0], exec.argvTruncated], [sb.id, 'js', true])
  assert.is(exec.argv!.join('').length, 1024)
  assert.ok(typeof exec.exec === 'string' && exec.exec.length > 0)
  assert.is(kill.sandbox, sb.id)
  assert.equal([token.tenant, token.keyId, token.target, token.scopes, token.newKeyId], ['ops', keyIdOf(adminKey), 'team-b', ['sandbox:read'], keyIdOf(newKey)])
  assert.equal([quotas.target, quotas.quotas], ['team-a', { maxSandboxes: 1 }])
  assert.equal([refused.tenant, refused.count], ['team-a', 2])
  for (let i = 1; i < mine.length; i++) assert.ok(mine[i]!.at >= mine[i - 1]!.at)
  for (const x of mine) assert.ok(x.ms >= 0 && Math.abs(x.at - Date.now()) < 60_000)

  // Filters: one sandbox's story, one tenant, one group of actions.
  assert.equal((await admin.audit({ sandbox: sb.id })).records.map((x) => x.action), ['sandbox.create', 'exec', 'sandbox.kill'])
  assert.equal((await admin.audit({ tenant: 'ops', action: 'token' })).records.map((x) => x.action), ['token.create'])

  // A kill of many names only what it ended: an id the tenant has not (another's, or none) is counted as failed.
  const second = await tenant.create({ backend: 'function', ttlMs: 60_000 })
  const outcomes = await tenant.kill([second.id, 'zzzzzzzzzzzzzzzz'])
  assert.equal(outcomes.map((o) => o.ok), [true, false])
  const many = (await admin.audit({ action: 'sandbox.kill' })).records.at(-1)!
  assert.equal([many.outcome, many.sandboxes, many.count, many.failed], ['ok', [second.id], 1, 1])

  // On disk: JSON lines, a file per tenant in the data dir, never a key's secret, stdin or output.
  const file = ['team-a', 'ops'].map((t) => readFileSync(join(dir, 'cp', 'audit', `${t}.log`), 'utf8')).join('')
  assert.is(file.trimEnd().split('\n').length >= 6, true)
  for (const secret of [tenantKey, adminKey, newKey].map((k) => k.slice(18))) assert.not.ok(file.includes(secret), 'no key secret')
  assert.not.ok(file.includes('secret-stdin'))
  assert.not.ok(file.includes('2000\n'))

  // A tenant's key, even one that can do everything else, cannot read it.
  const denied = await refusal(tenant.audit({}))
  assert.equal([denied.code, denied.details?.scope], ['WARREN_ERR_FORBIDDEN', 'admin'])
}))

test('audit-query fields at and past their bounds, each refusal naming its field', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']) })
  defer(() => admin.close())
  // At the bounds: answered.
  await admin.audit({ limit: 1 })
  await admin.audit({ limit: 1000, since: 0, until: Number.MAX_SAFE_INTEGER, tenant: 't'.repeat(256), sandbox: 's'.repeat(64), action: 'a'.repeat(64) })
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ limit: 0 }, 'limit'], [{ limit: 1001 }, 'limit'], [{ limit: 1.5 }, 'limit'], [{ limit: '10' }, 'limit'],
    [{ since: -1 }, 'since'], [{ until: 'yesterday' }, 'until'],
    [{ tenant: '' }, 'tenant'], [{ tenant: 't'.repeat(257) }, 'tenant'], [{ tenant: 7 }, 'tenant'],
    [{ sandbox: 's'.repeat(65) }, 'sandbox'], [{ action: 'a'.repeat(65) }, 'action'], [{ action: [] }, 'action']
  ]
  for (const [q, field] of cases) {
    const e = await refusal(admin.audit(q as never))
    assert.ok(isWarrenError(e, 'WARREN_ERR_INVALID_ARGUMENT') || e.code === 'WARREN_ERR_INVALID_ARGUMENT', JSON.stringify(q))
    assert.is(e.details?.field, field, JSON.stringify(q))
  }
  // Refusals of the query itself are not audit records (reading is not a control action).
  assert.equal((await admin.audit({})).records, [])
}))

test.run()
