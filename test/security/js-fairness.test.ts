/**
 * Finding 6 (one tenant's calls starved another's): tenant A fills the node's `js` processes
 * with endless loops, and tenant B's one-line call still runs within its own time limit; a
 * time limit beyond the node's bound is refused, naming the field. Through the public SDK
 * against a real control plane and node process.
 */
import { availableParallelism } from 'node:os'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES } from '../cluster/harness.js'
import { tenantCluster } from './support.js'

/** A real cluster with two tenants' clients, A and B. */
async function tenants (defer: (fn: () => unknown) => void): Promise<{ a: Client, b: Client }> {
  const { cp, client: a } = await tenantCluster(defer, 'n1')
  const b = await connect({ url: cp.url, token: await cp.createToken('tenant-b', [...ALL_SCOPES]) })
  defer(() => b.close())
  return { a, b }
}

test('tenant A\'s endless loops on every js process do not starve tenant B\'s one-line call', timed(90_000, async (defer) => {
  const { a, b } = await tenants(defer)
  // As many loops as the node has js processes, and more: with a plain queue they hold them all.
  const loops = Math.max(4, availableParallelism())
  const sa = await a.create({ backend: 'function' })
  let started = 0
  const spinning = Array.from({ length: loops }, async () =>
    await sa.exec(['js', 'console.log("spinning"); for (;;) {}'], { timeoutMs: 30_000, onStdout: () => { started++ } }).catch((e: unknown) => e))
  defer(async () => { await sa.kill(); await Promise.all(spinning) })
  // A's loops hold processes before B asks (at least one runs; the rest run or wait for one).
  await waitFor(() => started >= 1, 20_000, 'a loop of A to run')

  const sb = await b.create({ backend: 'function' })
  const r = await sb.exec(['js', 'console.log(1)'], { timeoutMs: 5000 })
  assert.is(r.reason, undefined, `B's call: ${r.reason ?? ''} ${r.message ?? ''}`)
  assert.is(r.exitCode, 0)
  assert.is(r.stdout, '1\n')
}))

/** The node's default bound on a call's time limit. */
const MAX_TIMEOUT_MS = 60_000

test('a time limit beyond the node\'s bound is refused with INVALID_ARGUMENT naming timeoutMs', timed(60_000, async (defer) => {
  const { a } = await tenants(defer)
  const sb = await a.create({ backend: 'function' })
  const err = await sb.exec(['js', '1'], { timeoutMs: MAX_TIMEOUT_MS + 1 }).then(
    (r) => new Error(`accepted: ${JSON.stringify(r)}`), (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
  assert.is(err.details?.field, 'timeoutMs')
  const ok = await sb.exec(['js', 'console.log(2)'], { timeoutMs: MAX_TIMEOUT_MS })
  assert.is(ok.stdout, '2\n')
}))

test.run()
