/**
 * Keys and quotas through a real control plane: a revoked or expired key's open session is
 * closed at once (WARREN_ERR_UNAUTHENTICATED), a rotated admin key stops working also across a
 * restart, only an admin key may list, revoke and rotate, and every field is refused past its
 * bounds naming it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { QuotaDefaults, type ControlPlane } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../../src/errors.js'
import { connect, type Client } from '../../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../harness.js'
import { timed } from '../../support/index.js'

async function refused (p: Promise<unknown>, code: string, field?: string): Promise<WarrenError> {
  try {
    await p
  } catch (err) {
    assert.ok(isWarrenError(err), `not a WarrenError: ${String(err)}`)
    assert.is(err.code, code, err.message)
    if (field !== undefined) assert.is(err.details?.field, field, `details ${JSON.stringify(err.details)}`)
    return err
  }
  assert.unreachable(`accepted, expected ${code}`)
  throw new Error('unreachable')
}

/** The reason the link of `client` closes with, once it does. */
function closed (client: Client): Promise<unknown> {
  return new Promise((resolve) => client.link.once('close', resolve))
}

const noRetry = { link: { reconnect: { maxAttempts: 0 } } }
const idOf = (token: string): string => /^wrn_([0-9a-z]{12})_/.exec(token)![1]!

async function admin (defer: (fn: () => unknown) => void, cp: ControlPlane): Promise<Client> {
  const client = await connect({ url: cp.url, token: (await cp.adminKey()).token!, ...noRetry })
  defer(() => client.close())
  return client
}

test('revoking a key closes its open session at once; the key is refused from then on', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const root = await admin(defer, cp)
  const token = await root.createToken('t', [...ALL_SCOPES])
  const user = await connect({ url: cp.url, token, ...noRetry })
  defer(() => user.close())
  assert.equal(await user.list(), [])
  const cut = closed(user)
  assert.equal(await root.revokeToken(idOf(token)), { id: idOf(token), revoked: true })
  const reason = await cut as WarrenError
  assert.equal([reason.code, reason.details?.reason, reason.details?.keyId], [ErrorCodes.UNAUTHENTICATED, 'revoked', idOf(token)])
  await refused(user.list(), ErrorCodes.UNAUTHENTICATED)
  await refused(connect({ url: cp.url, token, ...noRetry }), ErrorCodes.UNAUTHENTICATED)
  await refused(root.revokeToken(idOf(token)), ErrorCodes.NOT_FOUND, 'id')
  // The admin's own session was not touched.
  assert.ok((await root.tokens()).every((k) => k.id !== idOf(token)))
}))

test('an expiring key\'s session is closed at its expiry (reason expired), and the key refused', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const root = await admin(defer, cp)
  const token = await root.createToken('t', ['sandbox:read'], { expiresInMs: 1000 })
  const listed = (await root.tokens({ tenant: 't' }))[0]!
  assert.ok(listed.expiresAt! > Date.now() && listed.expiresAt! <= Date.now() + 1000)
  const user = await connect({ url: cp.url, token, ...noRetry })
  defer(() => user.close())
  const reason = await closed(user) as WarrenError
  assert.equal([reason.code, reason.details?.reason], [ErrorCodes.UNAUTHENTICATED, 'expired'])
  await refused(connect({ url: cp.url, token, ...noRetry }), ErrorCodes.UNAUTHENTICATED)
}))

test('only an admin key lists, revokes, rotates and sets quotas (FORBIDDEN naming the scope), whatever it names', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const root = await admin(defer, cp)
  const other = await root.createToken('b', [...ALL_SCOPES])
  const user = await connect({ url: cp.url, token: await root.createToken('a', [...ALL_SCOPES, 'image:push']), ...noRetry })
  defer(() => user.close())
  for (const p of [user.tokens(), user.tokens({ tenant: 'a' }), user.revokeToken(idOf(other)), user.rotateAdminKey(), user.setQuotas('a', { maxSandboxes: 1e9 }), user.quotas('a'), user.createToken('a', ['admin'])]) {
    const err = await refused(p, ErrorCodes.FORBIDDEN)
    assert.is(err.details?.scope, 'admin')
  }
  // Nothing changed: the other tenant's key works.
  const b = await connect({ url: cp.url, token: other, ...noRetry })
  await b.close()
}))

test('request fields past their bounds are refused naming them', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const root = await admin(defer, cp)
  for (const ms of [0, 999, 3650 * 86_400_000 + 1, 1.5, -1]) await refused(root.createToken('t', ['sandbox:read'], { expiresInMs: ms }), ErrorCodes.INVALID_ARGUMENT, 'expiresInMs')
  await refused(root.request({ type: 'token-create', tenant: 't', scopes: ['sandbox:read'], expiresInMs: '1d' } as never), ErrorCodes.INVALID_ARGUMENT, 'expiresInMs')
  for (const limit of [0, 1001, 'x']) await refused(root.request({ type: 'token-list', limit } as never), ErrorCodes.INVALID_ARGUMENT, 'limit')
  // At the edges: taken.
  await root.createToken('t', ['sandbox:read'], { expiresInMs: 1000 })
  await root.createToken('t', ['sandbox:read'], { expiresInMs: 3650 * 86_400_000 })
  assert.is((await root.request<unknown[]>({ type: 'token-list', limit: 1 } as never)).length, 1)
  assert.ok((await root.request<unknown[]>({ type: 'token-list', limit: 1000, after: '000000000000' } as never)).length >= 3)
  for (const after of ['', 'UPPERCASE000', 'a'.repeat(13), 5]) await refused(root.request({ type: 'token-list', after } as never), ErrorCodes.INVALID_ARGUMENT, 'after')
  await refused(root.request({ type: 'token-list', tenant: 'x'.repeat(257) } as never), ErrorCodes.INVALID_ARGUMENT, 'tenant')
  for (const id of [undefined, '', 'short', 'a'.repeat(64), 42]) await refused(root.request({ type: 'token-revoke', id } as never), ErrorCodes.INVALID_ARGUMENT, 'id')
  await refused(root.revokeToken('000000000000'), ErrorCodes.NOT_FOUND, 'id')
  await refused(root.revokeToken(idOf((await cp.adminKey()).token!)), ErrorCodes.INVALID_ARGUMENT, 'id')
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ maxSandboxes: -1 }, 'quotas.maxSandboxes'], [{ maxSandboxes: 1.5 }, 'quotas.maxSandboxes'], [{ maxSandboxes: 1e9 + 1 }, 'quotas.maxSandboxes'],
    [{ createsPerSecond: 0 }, 'quotas.createsPerSecond'], [{ createsPerSecond: 1e10 }, 'quotas.createsPerSecond'], [{ createBurst: 0.5 }, 'quotas.createBurst'],
    [{ requestsPerSecond: 0 }, 'quotas.requestsPerSecond'], [{ requestsPerSecond: Infinity }, 'quotas.requestsPerSecond'], [{ requestBurst: 0 }, 'quotas.requestBurst'],
    [{ trajectoryBytes: -1 }, 'quotas.trajectoryBytes'], [{ trajectoryBytes: 2 ** 50 + 1 }, 'quotas.trajectoryBytes'], [{ trajectoryBytes: 0.5 }, 'quotas.trajectoryBytes'],
    [{ maxSandboxes: '5' }, 'quotas.maxSandboxes'], [{ nope: 1 }, 'quotas.nope']
  ]
  for (const [q, field] of bad) await refused(root.setQuotas('t', q as never), ErrorCodes.INVALID_ARGUMENT, field)
  await refused(root.setQuotas('__proto__', { maxSandboxes: 1 }), ErrorCodes.INVALID_ARGUMENT, 'tenant')
  // The edges themselves are taken.
  const low = { maxSandboxes: 0, createsPerSecond: 0.001, createBurst: 1, requestsPerSecond: 0.001, requestBurst: 1, trajectoryBytes: 0 }
  const high = { maxSandboxes: 1e9, createsPerSecond: 1e9, createBurst: 1e9, requestsPerSecond: 1e9, requestBurst: 1e9, trajectoryBytes: 2 ** 50 }
  assert.equal(await root.setQuotas('edge', low), low)
  assert.equal(await root.setQuotas('edge', high), high)
}))

test('quotas: an unknown tenant is made by a set and NOT_FOUND to a get; a lowered maximum refuses the next create at once', timed(20_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const root = await admin(defer, cp)
  await refused(root.quotas('ghost'), ErrorCodes.NOT_FOUND, 'tenant')
  assert.equal(await root.setQuotas('ghost', { maxSandboxes: 3 }), { ...QuotaDefaults, maxSandboxes: 3 })
  assert.is((await root.quotas('ghost')).maxSandboxes, 3)
  const user = await connect({ url: cp.url, token: await root.createToken('ghost', [...ALL_SCOPES]), ...noRetry })
  defer(() => user.close())
  await root.setQuotas('ghost', { maxSandboxes: 0 })
  const err = await refused(user.create({ backend: 'function' }), ErrorCodes.QUOTA)
  assert.is(err.details?.quota, 'concurrent')
  // A rate as low as it goes: the burst of one is taken (the create then finds no node), the next is refused by rate.
  await root.setQuotas('ghost', { maxSandboxes: 10, createsPerSecond: 0.001, createBurst: 1 })
  await refused(user.create({ backend: 'function', deadlineMs: 0 }), ErrorCodes.NO_CAPACITY)
  const rate = await refused(user.create({ backend: 'function', deadlineMs: 0 }), ErrorCodes.QUOTA)
  assert.is(rate.details?.quota, 'rate')
  // Raised: applied without a restart.
  await root.setQuotas('ghost', { createsPerSecond: 1e6, createBurst: 1e6 })
  await refused(user.create({ backend: 'function', deadlineMs: 0 }), ErrorCodes.NO_CAPACITY)
  assert.ok((await root.tenants()).some((t) => t.tenant === 'ghost' && t.quotas.createsPerSecond === 1e6))
}))

test('rotating the admin key: the caller gets the new key, then its session ends; across a restart the new key works and the old is refused', timed(40_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rotate-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp1 = await startTestControlPlane({ dataDir: dir })
  let up1 = true
  defer(async () => { if (up1) await cp1.close() })
  const first = await cp1.adminKey()
  assert.is(first.how, 'created')
  const old = first.token!
  const root = await connect({ url: cp1.url, token: old, ...noRetry })
  defer(() => root.close())
  const tenant = await root.createToken('t', ['sandbox:read'])
  const cut = closed(root)
  const fresh = await root.rotateAdminKey()
  assert.ok(/^wrn_[0-9a-z]{12}_/.test(fresh) && fresh !== old)
  assert.is((await cut as WarrenError).code, ErrorCodes.UNAUTHENTICATED)
  await refused(connect({ url: cp1.url, token: old, ...noRetry }), ErrorCodes.UNAUTHENTICATED)
  up1 = false
  await cp1.close()

  const cp2 = await startTestControlPlane({ dataDir: dir })
  defer(() => cp2.close())
  assert.is((await cp2.adminKey({ candidate: old })).how, 'lost', 'the old key is not the admin key any more')
  const again = await cp2.adminKey({ candidate: fresh })
  assert.equal([again.how, again.token], ['kept', fresh])
  await refused(connect({ url: cp2.url, token: old, ...noRetry }), ErrorCodes.UNAUTHENTICATED)
  const root2 = await connect({ url: cp2.url, token: fresh, ...noRetry })
  defer(() => root2.close())
  const keys = await root2.tokens()
  assert.equal(keys.filter((k) => k.admin === true).map((k) => k.id), [idOf(fresh)])
  assert.ok(keys.some((k) => k.id === idOf(tenant)), 'the tenant key survived the rotation and the restart')
  const t = await connect({ url: cp2.url, token: tenant, ...noRetry })
  await t.close()
}))

test.run()
