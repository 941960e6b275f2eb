/**
 * A tenant's request rate: one bucket over all its sessions, taken by every request of every
 * type before its session sees it. Past it: WARREN_ERR_QUOTA (`quota: 'requests'`, retryAfterMs),
 * not handled and not audited; other tenants go on; a changed rate applies to open sessions.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { TenantRequestRates } from '../../../src/cluster/control/request-rates.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { connect, type Client } from '../../../src/sdk/index.js'
import { timed } from '../../support/index.js'
import { startTestControlPlane } from '../harness.js'

const noRetry = { link: { reconnect: { maxAttempts: 0 } } }

test('a bucket per tenant: its burst, then refusals saying how long to wait, then what dripped in', () => {
  let now = 0
  const rates = new TenantRequestRates(() => now)
  assert.is(rates.take('unknown'), undefined)
  rates.set('t', { requestsPerSecond: 2, requestBurst: 3 })
  for (let i = 0; i < 3; i++) assert.is(rates.take('t'), undefined)
  const refusal = rates.take('t')
  assert.ok(isWarrenError(refusal, ErrorCodes.QUOTA), String(refusal))
  assert.equal([refusal.details?.quota, refusal.details?.limit, refusal.details?.retryAfterMs], ['requests', 2, 500])
  // Another tenant's bucket is its own.
  rates.set('u', { requestsPerSecond: 2, requestBurst: 1 })
  assert.is(rates.take('u'), undefined)
  now = 500
  assert.is(rates.take('t'), undefined)
  assert.ok(rates.take('t') !== undefined)
  // A new rate starts with a full bucket.
  rates.set('t', { requestsPerSecond: 2, requestBurst: 2 })
  assert.is(rates.take('t'), undefined)
})

/** Sends `list` on the clients in turn until one is refused; returns how many passed and the refusal. */
async function untilRefused (clients: Client[], max: number): Promise<{ passed: number, refusal: unknown }> {
  for (let i = 0; i < max; i++) {
    try { await clients[i % clients.length]!.list() } catch (err) { return { passed: i, refusal: err } }
  }
  return { passed: max, refusal: undefined }
}

test('past its burst every session of the tenant is refused QUOTA requests, unaudited; another tenant goes on; a raised rate applies at once', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']), ...noRetry })
  defer(() => admin.close())
  // One request in 1,000 s after the burst: nothing drips in while the test runs.
  assert.equal((await admin.setQuotas('chatty', { requestsPerSecond: 0.001, requestBurst: 6 })).requestBurst, 6)
  const key = await cp.createToken('chatty', ['sandbox:create', 'sandbox:read'])
  const a = await connect({ url: cp.url, token: key, ...noRetry })
  defer(() => a.close())
  const b = await connect({ url: cp.url, token: key, ...noRetry })
  defer(() => b.close())

  const { passed, refusal } = await untilRefused([a, b], 20)
  assert.is(passed, 6)
  assert.ok(isWarrenError(refusal, ErrorCodes.QUOTA), String(refusal))
  assert.is(refusal.details?.quota, 'requests')
  assert.ok(Number(refusal.details?.retryAfterMs) > 0, JSON.stringify(refusal.details))
  // A new session of the same tenant gets no fresh bucket.
  const c = await connect({ url: cp.url, token: key, ...noRetry })
  defer(() => c.close())
  assert.ok(isWarrenError(await c.list().catch((e: unknown) => e), ErrorCodes.QUOTA))
  // A refused kill is not handled, so not audited either.
  assert.ok(isWarrenError(await a.request({ type: 'kill', id: 'sb-nope' }).catch((e: unknown) => e), ErrorCodes.QUOTA))

  const other = await connect({ url: cp.url, token: await cp.createToken('quiet', ['sandbox:read']), ...noRetry })
  defer(() => other.close())
  assert.equal(await other.list(), [])

  await admin.setQuotas('chatty', { requestsPerSecond: 1000 })
  assert.equal(await a.list(), [])
  assert.equal(await c.list(), [])
  const kills = await admin.audit({ tenant: 'chatty', action: 'sandbox.kill' })
  assert.equal(kills.records, [])
}))

test.run()
