import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError } from '../../../src/errors.js'
import { bearerToken, objectUrl, parseRange, tokenCheck } from '../../../src/images/blob/index.js'
import { Limiter } from '../../../src/images/blob/limiter.js'
import { createSyncBatcher } from '../../../src/images/blob/sync.js'
import { timed, waitFor } from '../../support/index.js'

test('parseRange follows RFC 9110 for single ranges', () => {
  const size = 1000
  assert.equal(parseRange(undefined, size), { kind: 'full' })
  assert.equal(parseRange('bytes=0-9', size), { kind: 'partial', start: 0, end: 9 })
  assert.equal(parseRange('bytes=990-', size), { kind: 'partial', start: 990, end: 999 })
  assert.equal(parseRange('bytes=-10', size), { kind: 'partial', start: 990, end: 999 })
  assert.equal(parseRange('bytes=-5000', size), { kind: 'partial', start: 0, end: 999 })
  assert.equal(parseRange('bytes=500-99999', size), { kind: 'partial', start: 500, end: 999 })
  assert.equal(parseRange('bytes=1000-1001', size), { kind: 'unsatisfiable' })
  assert.equal(parseRange('bytes=-0', size), { kind: 'unsatisfiable' })
  assert.equal(parseRange('bytes=99999999999999999999-', size), { kind: 'unsatisfiable' })
  assert.equal(parseRange('bytes=0-1,5-6', size), { kind: 'unsatisfiable' })
  assert.equal(parseRange('bytes=0-0', 0), { kind: 'unsatisfiable' })
  // Headers that do not parse are ignored: the whole object.
  for (const h of ['items=0-5', 'bytes=5-2', 'bytes=a-b', 'bytes=-', 'bytes 0-5']) assert.equal(parseRange(h, size), { kind: 'full' }, h)
})

test('bearer tokens: parsing and a constant-time check', () => {
  assert.is(bearerToken('Bearer abc.def'), 'abc.def')
  assert.is(bearerToken('bearer  abc'), 'abc')
  assert.is(bearerToken(undefined), undefined)
  assert.is(bearerToken('Basic abc'), undefined)
  assert.is(bearerToken('Bearer '), undefined)
  const check = tokenCheck('secret')
  assert.is(check('secret'), true)
  assert.is(check('secre'), false)
  assert.is(check('secret2'), false)
})

test('objectUrl keeps a base path prefix', () => {
  assert.is(objectUrl('http://h:1', 'blobs/sha256/ab'), 'http://h:1/blobs/sha256/ab')
  assert.is(objectUrl('https://b.s3.example.com/warren', 'blobs/sha256/ab'), 'https://b.s3.example.com/warren/blobs/sha256/ab')
  assert.is(objectUrl('https://b.s3.example.com/warren/', 'blobs/sha256/ab'), 'https://b.s3.example.com/warren/blobs/sha256/ab')
})

test('the limiter bounds slots, serves high priority first, refuses past its queue, honours abort', timed(5000, async () => {
  const lim = new Limiter(1, 3)
  const order: string[] = []
  const first = await lim.acquire('high').granted
  const low = lim.acquire('low')
  const high = lim.acquire('high')
  const ac = new AbortController()
  const aborted = lim.acquire('high', ac.signal)
  try {
    await lim.acquire('high').granted
    assert.unreachable('queue bound ignored')
  } catch (err) {
    assert.ok(isWarrenError(err, 'WARREN_ERR_OVERLOADED'))
  }
  ac.abort(new Error('gave up'))
  await aborted.granted.then(() => assert.unreachable('aborted ticket granted'), (err: Error) => assert.is(err.message, 'gave up'))
  void low.granted.then((r) => { order.push('low'); r() })
  void high.granted.then((r) => { order.push('high'); r() })
  assert.equal(lim.stats, { active: 1, queued: 2 })
  first()
  first() // twice is harmless
  await low.granted
  assert.equal(order, ['high', 'low'])
  await Promise.resolve()
  assert.equal(lim.stats, { active: 0, queued: 0 })
  // A promoted low ticket overtakes.
  const hold = await lim.acquire().granted
  const a = lim.acquire('low'); const b = lim.acquire('low')
  const seen: string[] = []
  void a.granted.then((r) => { seen.push('a'); r() })
  void b.granted.then((r) => { seen.push('b'); r() })
  b.promote()
  hold()
  await a.granted
  assert.equal(seen, ['b', 'a'])
}))

test('group commit: callers during a sync share the next one', timed(5000, async () => {
  let syncs = 0
  let finish: (() => void) | undefined
  const batcher = createSyncBatcher(() => new Promise<void>((resolve) => { syncs++; finish = resolve }))
  const a = batcher.sync()
  const b = batcher.sync()
  const c = batcher.sync()
  assert.is(syncs, 1)
  finish!()
  await a
  // b and c waited for a second sync (their writes may postdate the first).
  await waitFor(() => syncs === 2, 2000, 'the second sync')
  finish!()
  await Promise.all([b, c])
  assert.is(syncs, 2)
}))

test.run()
