import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { CreationSeries, CreationSeriesDefaults } from '../../../src/cluster/control/creation-series.js'

test('counts each second, with latency percentiles of those made', () => {
  let now = 1_000_000_000_000
  const s = new CreationSeries(() => now)
  for (let i = 1; i <= 100; i++) s.record(1, 0, i) // 1..100 ms
  s.record(0, 3, 5000) // failures carry no latency
  now += 1000
  s.record(2, 0, 40)
  const pts = s.read(3)
  assert.is(pts.length, 3)
  assert.equal(pts.map((p) => p.t), [now - 2000, now - 1000, now])
  assert.equal(pts[0], { t: now - 2000, created: 0, failed: 0 })
  const first = pts[1]!
  assert.is(first.created, 100)
  assert.is(first.failed, 3)
  // A percentile is its bucket's upper bound: within one bucket's growth of the true value.
  for (const [got, want] of [[first.p50!, 50], [first.p90!, 90], [first.p99!, 99]] as const) {
    assert.ok(got >= want && got <= want * CreationSeriesDefaults.growth, `${got} for ${want}`)
  }
  assert.ok(pts[2]!.p50! >= 40 && pts[2]!.p50! <= 40 * CreationSeriesDefaults.growth)
})

test('the ring holds the window and forgets what is older, whatever is recorded', () => {
  let now = 5_000_000
  const s = new CreationSeries(() => now)
  s.record(7, 0, 10)
  now += CreationSeriesDefaults.windowSec * 1000 // one whole lap later: the same slot, a new second
  s.record(1, 1, 10_000_000) // past the last bucket: counted there
  const pts = s.read()
  assert.is(pts.length, CreationSeriesDefaults.windowSec)
  assert.is(pts.reduce((a, p) => a + p.created, 0), 1)
  assert.is(pts.at(-1)!.failed, 1)
  assert.ok(pts.at(-1)!.p99! > 300_000) // the last bucket's bound
  // The window asked for is bounded both ways.
  assert.is(s.read(0).length, 1)
  assert.is(s.read(10_000).length, CreationSeriesDefaults.windowSec)
  s.record(0, 0, 5) // nothing: no bucket touched
  s.record(1, 0, -3) // a clock step backwards counts as the fastest bucket
  assert.is(s.read(1)[0]!.created, 2)
})

test.run()
