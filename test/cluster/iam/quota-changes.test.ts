/**
 * How a quota change combines with what a tenant had: a rate given alone brings a burst of one
 * second's worth (a finding: `--creates-per-second 5` alone let 20,000 creates through at once).
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { QuotaDefaults } from '../../../src/cluster/iam/index.js'
import { timed } from '../../support/index.js'
import { clockStore } from './helpers.js'

test('a rate alone sets the burst to one second of it (at least 1); a burst alone keeps the rate; both given, both kept', timed(10_000, (defer) => {
  const { store } = clockStore(defer)
  assert.equal(store.upsertTenant('a', { createsPerSecond: 5 }), { ...QuotaDefaults, createsPerSecond: 5, createBurst: 5 })
  assert.is(store.upsertTenant('a', { createsPerSecond: 0.5 }).createBurst, 1)
  assert.equal(store.upsertTenant('a', { createBurst: 40 }), { ...QuotaDefaults, createsPerSecond: 0.5, createBurst: 40 })
  assert.equal(store.upsertTenant('a', { createsPerSecond: 10, createBurst: 300 }), { ...QuotaDefaults, createsPerSecond: 10, createBurst: 300 })
  assert.is(store.upsertTenant('a', { maxSandboxes: 7 }).createBurst, 300, 'another quota leaves the burst as it is')
  // A new tenant made by its first quota change gets the same: 5 a second allows 5 in a row, not 20,000.
  store.upsertTenant('b', { createsPerSecond: 5 })
  assert.is(store.quotasOf('b').createBurst, 5)
}))

test.run()
