/**
 * A tenant's request rate: one bucket over all its sessions, taken by every request of every
 * type before its session sees it. Past it: WARREN_ERR_QUOTA (`quota: 'requests'`, retryAfterMs),
 * not handled and not audited; other tenants go on; a changed rate applies to open sessions.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { WebSocket } from 'ws'
import { TenantRequestRates } from '../../../src/cluster/control/request-rates.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { createLogger } from '../../../src/log/index.js'
import { connect, type Client } from '../../../src/sdk/index.js'
import { createCodec, PROTOCOL_VERSION } from '../../../src/transport/index.js'
import { timed, waitFor } from '../../support/index.js'
import { captureLog } from '../../support/log-capture.js'
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

test('a link past its tenant\'s rate is not read until a token is due (at most 1 s); an admin key is held to no rate', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']), ...noRetry })
  defer(() => admin.close())
  // The admin's own tenant set to a rate it would lock itself out with: admin keys do not take from it.
  await admin.setQuotas('ops', { requestsPerSecond: 0.001, requestBurst: 1 })
  for (let i = 0; i < 5; i++) assert.equal(await admin.list(), [])
  await admin.setQuotas('held', { requestsPerSecond: 0.001, requestBurst: 1 })
  const user = await connect({ url: cp.url, token: await cp.createToken('held', ['sandbox:read']), ...noRetry })
  defer(() => user.close())
  await user.list()
  assert.ok(isWarrenError(await user.list().catch((e: unknown) => e), ErrorCodes.QUOTA))
  // That refusal stopped the reading: the next request is not even looked at for a second.
  const started = performance.now()
  assert.ok(isWarrenError(await user.list().catch((e: unknown) => e), ErrorCodes.QUOTA))
  assert.ok(performance.now() - started >= 990, `answered after ${Math.round(performance.now() - started)} ms`)
}))

test('refusals echo at most bounded parts of a request, a 64-bit quota is refused naming it, a stream open is UNSUPPORTED, and a repeated refusal is one log line', timed(30_000, async (defer) => {
  const out = captureLog()
  const cp = await startTestControlPlane({ logger: createLogger({ level: 'info', destination: out }) })
  defer(() => cp.close())
  const token = await cp.createToken('ops', ['admin'])
  const admin = await connect({ url: cp.url, token, ...noRetry })
  defer(() => admin.close())
  // A label key of 600,000 characters, echoed whole, would not fit an answer's frame.
  const long = await admin.request({ type: 'list', labels: { ['k'.repeat(600_000)]: 'v' } } as never).catch((e: unknown) => e)
  assert.ok(isWarrenError(long, ErrorCodes.INVALID_ARGUMENT), String(long).slice(0, 200))
  assert.ok(long.message.length <= 2049 && String(long.details?.field).length <= 513, `${long.message.length} / ${String(long.details?.field).length}`)
  const big = await admin.request({ type: 'tenant-quotas', tenant: 'b', quotas: { maxSandboxes: 2n ** 63n } } as never).catch((e: unknown) => e)
  assert.ok(isWarrenError(big, ErrorCodes.INVALID_ARGUMENT) && big.details?.field === 'quotas.maxSandboxes', String(big))
  assert.equal((await admin.audit({ action: 'quota' })).records.map((r) => r.outcome), ['WARREN_ERR_INVALID_ARGUMENT'])

  for (let i = 0; i < 50; i++) await admin.request({ type: 'info', id: 'zzzzzzzzzzzzzzzz' } as never).catch(() => {})
  const lines = out.records().filter((r) => r.msg === 'request refused' && r.type === 'info')
  assert.is(lines.length, 1, 'the first of its kind; the rest are counted once the window ends')

  // A raw client opening a stream: refused with a public code, never the kernel's.
  const codec = createCodec(1024 * 1024)
  const ws = new WebSocket(cp.url, { perMessageDeflate: false })
  defer(() => ws.terminate())
  const frames: Array<Record<string, unknown>> = []
  ws.on('message', (d: Buffer) => { for (const v of codec.decode(d).values) frames.push(v as Record<string, unknown>) })
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  ws.send(codec.encode({ k: 'auth', token, v: PROTOCOL_VERSION } as never))
  await waitFor(() => frames.find((f) => f.k === 'welcome'), 5000, 'welcome')
  ws.send(codec.encode({ k: 'open', sid: 1, to: 'session' } as never))
  const cancel = await waitFor(() => frames.find((f) => f.k === 'cancel'), 5000, 'the cancel')
  assert.is((cancel.err as { code: string }).code, ErrorCodes.UNSUPPORTED)
}))

test('the SDK sends a request refused for the rate again after its retryAfterMs, up to rateLimitWaitMs; 0 throws the refusal at once', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']), ...noRetry })
  defer(() => admin.close())
  await admin.setQuotas('paced', { requestsPerSecond: 10, requestBurst: 2 })
  const key = await cp.createToken('paced', ['sandbox:create', 'sandbox:read'])
  const patient = await connect({ url: cp.url, token: key, ...noRetry })
  defer(() => patient.close())
  // 12 at once against a burst of 2 and 10 a second: every one answered, none refused.
  const answers = await Promise.all(Array.from({ length: 12 }, async () => await patient.list().then(() => 'ok', (e: unknown) => String(e))))
  assert.equal(answers, Array(12).fill('ok'))
  const impatient = await connect({ url: cp.url, token: key, ...noRetry, rateLimitWaitMs: 0 })
  defer(() => impatient.close())
  const refusals = await Promise.all(Array.from({ length: 12 }, async () => await impatient.list().then(() => undefined, (e: unknown) => e)))
  const refused = refusals.find((e) => e !== undefined)
  assert.ok(isWarrenError(refused, ErrorCodes.QUOTA), String(refused))
  assert.is(refused.details?.quota, 'requests')
  // A wait the cluster asks for past rateLimitWaitMs is not waited: the refusal comes at once.
  await admin.setQuotas('paced', { requestsPerSecond: 0.001, requestBurst: 1 })
  await patient.list().catch(() => {})
  const started = Date.now()
  const late = await patient.list().then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(late, ErrorCodes.QUOTA) && Date.now() - started < 15_000, String(late))
}))

test.run()
