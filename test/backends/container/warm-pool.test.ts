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

test('a shape asked for once does not keep a sandbox: a quiet key shrinks to nothing and is forgotten', timed(5000, async (defer) => {
  const destroyed: string[] = []
  const pool = new WarmPool<string>({ create: async (key) => key, destroy: async (item) => { destroyed.push(item) }, shrinkAfterMs: 20, idleKeyMs: 40 })
  defer(() => pool.close())
  pool.claim('once')
  await waitFor(() => pool.sizes().once === 1, 2000, 'its refill')
  await waitFor(() => pool.sizes().once === undefined, 2000, 'the key to be forgotten')
  assert.equal(destroyed, ['once'])
  assert.is(pool.size, 0)
}))

test('a prewarmed key keeps its minimum however quiet it is', timed(5000, async (defer) => {
  const pool = new WarmPool<string>({ create: async (key) => key, destroy: async () => {}, min: 1, shrinkAfterMs: 10, idleKeyMs: 20 })
  defer(() => pool.close())
  pool.prewarm('kept', 1)
  await waitFor(() => pool.sizes().kept === 1, 2000, 'prewarm')
  pool.sweep()
  await new Promise((resolve) => setTimeout(resolve, 50))
  pool.sweep()
  assert.is(pool.sizes().kept, 1)
}))

test('at most maxTotal ready over all keys: a new key takes room from the least recently used one', timed(5000, async (defer) => {
  const destroyed: string[] = []
  const pool = new WarmPool<string>({ create: async (key) => key, destroy: async (item) => { destroyed.push(item) }, maxTotal: 2 })
  defer(() => pool.close())
  for (const key of ['a', 'b']) {
    pool.claim(key)
    await waitFor(() => pool.sizes()[key] === 1, 2000, `${key} filled`)
  }
  pool.claim('c')
  await waitFor(() => pool.sizes().c === 1, 2000, 'c filled')
  assert.equal([pool.sizes().a, pool.sizes().b, pool.size], [0, 1, 2])
  assert.equal(destroyed, ['a'], 'the least recently used gave its room')
  // Twenty keys asked for at once: builds take room only as it is there (the miss builds its own).
  for (let i = 0; i < 20; i++) pool.claim(`k${i}`)
  await waitFor(() => pool.sizes().k0 === 1 && pool.sizes().k1 === 1, 2000, 'the first two filled')
  assert.is(pool.size, 2)
  // Missed twice, k19's target is 2: it takes the room of the two less recently used.
  pool.claim('k19')
  await waitFor(() => pool.sizes().k19 === 2, 2000, 'k19 filled')
  assert.equal([pool.sizes().k0, pool.sizes().k1, pool.size], [0, 0, 2])
}))

test.run()
