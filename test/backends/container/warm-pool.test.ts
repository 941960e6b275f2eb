import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { WarmPool } from '../../../src/backends/container/warm-pool.js'
import { timed, waitFor } from '../../support/index.js'

test('a miss raises the target; the pool refills in the background; claims then hit', timed(5000, async (defer) => {
  let made = 0
  const destroyed: number[] = []
  const pool = new WarmPool<number>({ create: async () => ++made, destroy: async (n) => { destroyed.push(n) }, max: 3 })
  defer(() => pool.close())
  assert.is(pool.claim('k'), undefined)
  await waitFor(() => pool.size === 1, 2000, 'refill')
  assert.is(pool.claim('k'), 1)
  assert.is(pool.claim('k'), undefined) // a second miss: target 2
  await waitFor(() => pool.size === 2, 2000, 'refill to 2')
  await pool.close()
  assert.equal(destroyed.sort(), [2, 3])
  assert.is(pool.claim('k'), undefined)
}))

test('prewarm fills up to max and no further; keys are separate', timed(5000, async (defer) => {
  let made = 0
  const pool = new WarmPool<string>({ create: async (key) => `${key}${++made}`, destroy: async () => {}, max: 2 })
  defer(() => pool.close())
  pool.prewarm('a', 5)
  await waitFor(() => pool.sizes().a === 2, 2000, 'prewarm')
  assert.is(pool.sizes().b, undefined)
  assert.match(pool.claim('a')!, /^a/)
}))

test('a failing build is reported and does not wedge the pool', timed(5000, async (defer) => {
  let fail = true
  const errors: unknown[] = []
  const pool = new WarmPool<number>({ create: async () => { if (fail) throw new Error('no'); return 7 }, destroy: async () => {}, onError: (e) => errors.push(e) })
  defer(() => pool.close())
  pool.claim('k')
  await waitFor(() => errors.length === 1, 2000, 'error reported')
  fail = false
  pool.claim('k')
  await waitFor(() => pool.size >= 1, 2000, 'later refill works')
}))

test.run()
