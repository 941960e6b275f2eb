import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { EgressEvent } from '../../../src/backends/types.js'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { checkNothingLeft, makeBackend, run, sh } from './backend-helpers.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container egress-event and hostname tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('onEgress hears every destination the sandbox asks its proxy for: the allowed one and the refused one', timed(30_000, async (defer) => {
  const web = createServer((_req, res) => { res.end('outside\n') })
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise((resolve) => web.close(resolve)))
  const port = (web.address() as AddressInfo).port
  const b = makeBackend(defer, { egress: { hosts: { 'web.test': `127.0.0.1:${port}` }, lookup: async () => [] } })
  const h = await b.create({ egress: [`web.test:${port}`] })
  const events: EgressEvent[] = []
  const before = Date.now()
  const off = b.onEgress!(h, (e) => events.push(e))
  assert.is(await sh(b, h, `wget -q -O - http://web.test:${port}/`), 'outside\n')
  const refused = await run(b, h, 'wget -q -O - http://other.test/')
  assert.is.not(refused.exitCode, 0)
  await waitFor(() => events.length >= 2, 5000, 'two events')
  assert.equal(events.map(({ host, port, allowed }) => ({ host, port, allowed })), [
    { host: 'web.test', port, allowed: true },
    { host: 'other.test', port: 80, allowed: false }
  ])
  assert.ok(events.every((e) => e.at >= before && e.at <= Date.now()))
  off()
  await sh(b, h, `wget -q -O - http://web.test:${port}/`)
  assert.is(events.length, 2, 'nothing after unsubscribing')
}))

ctest('the hostname inside is spec.hostname, else the id; a pooled sandbox takes it when claimed', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  assert.is(await sh(b, await b.create({ id: 'sb-by-id' }), 'hostname'), 'sb-by-id\n')
  assert.is(await sh(b, await b.create({ id: 'sb-named', hostname: 'sandbox' }), 'hostname'), 'sandbox\n')
  const err = await b.create({ hostname: 'no spaces' }).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) && err.details?.field === 'hostname', String(err))

  const pooled = makeBackend(defer, { pool: { max: 2 } })
  await pooled.prewarm({}, 1)
  await waitFor(() => pooled.status().pooled === 1, 20_000, 'a pooled sandbox')
  const h = await pooled.create({ id: 'claimed', hostname: 'replayed' })
  assert.is.not(h.id, 'claimed', 'the create was a claim (a launch would have used the id)')
  assert.is(await sh(pooled, h, 'hostname'), 'replayed\n')
}))

ctest('nothing is left: no sandbox groups, run directories or staging copies', () => {
  checkNothingLeft()
})

test.run()
