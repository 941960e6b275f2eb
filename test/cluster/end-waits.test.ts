import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { ReplyTo } from '../../src/actors/index.js'
import { EndWaits } from '../../src/cluster/control/end-waits.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'

/** A reply that records how it was settled. */
function reply (): ReplyTo & { settled: Array<['resolve' | 'reject', unknown]> } {
  const settled: Array<['resolve' | 'reject', unknown]> = []
  return { settled, resolve: (v) => settled.push(['resolve', v]), reject: (e) => settled.push(['reject', e]) }
}

test('a wait answers when the last of its sandboxes ends, once; one sandbox can end several waits', () => {
  const waits = new EndWaits(10)
  const one = reply()
  const two = reply()
  const k1 = waits.add(['a', 'b'], one, () => 'one')
  const k2 = waits.add(['b'], two, () => 'two')
  assert.equal(waits.ended('a'), [])
  assert.equal(one.settled, [])
  assert.equal(waits.ended('b').sort(), [k1, k2].sort())
  assert.equal(one.settled, [['resolve', 'one']])
  assert.equal(two.settled, [['resolve', 'two']])
  assert.equal(waits.ended('b'), [], 'nothing waits on b any more')
  waits.expire(k1)
  assert.is(one.settled.length, 1, 'an answered wait does not answer again')
})

test('an expired wait answers with what it has; the bound on ids waited refuses with OVERLOADED and frees as waits settle', () => {
  const waits = new EndWaits(3)
  const r = reply()
  const key = waits.add(['a', 'b', 'c'], r, () => 'late')
  assert.throws(() => waits.add(['d'], reply(), () => 0), (e: unknown) => isWarrenError(e, ErrorCodes.OVERLOADED) && typeof e.details?.retryAfterMs === 'number')
  waits.expire(key)
  assert.equal(r.settled, [['resolve', 'late']])
  assert.equal(waits.ended('a'), [])
  const again = reply()
  waits.add(['x', 'y', 'z'], again, () => 'fits')
  waits.ended('x'); waits.ended('y'); waits.ended('z')
  assert.equal(again.settled, [['resolve', 'fits']])
})

test.run()
