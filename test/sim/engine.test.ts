import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { runSimulation, type Summary } from '../../sim/engine.js'
import { createRng, createZipf, lognormal } from '../../sim/random.js'
import { Workload } from '../../sim/workload.js'
import { timed } from '../support/index.js'

const small = {
  durationMs: 2 * 3_600_000,
  nodes: { count: 8, cpus: 16, memoryMiB: 64 * 1024, crashesPerNodePerDay: 2 },
  workload: { creationsPerDay: 200_000, burstSizeMedian: 500 },
  shards: 2
}

// Wall time, and the event count (the kernel's scheduler yields after a slice of real time), vary run to run.
const strip = (s: Summary): Omit<Summary, 'wallMs' | 'events'> => { const { wallMs, events, ...rest } = s; void wallMs; void events; return rest }

test('same seed, same summary; another seed, another run', timed(60_000, async () => {
  const a = await runSimulation({ ...small, seed: 7 })
  const b = await runSimulation({ ...small, seed: 7 })
  const c = await runSimulation({ ...small, seed: 8 })
  assert.ok(a.created > 1000, `created ${a.created}`)
  assert.equal(strip(a), strip(b))
  assert.is.not(a.created, c.created)
}))

test('a tiny cluster rejects what does not fit (NO_CAPACITY), and places what does', timed(60_000, async () => {
  const s = await runSimulation({
    seed: 3,
    durationMs: 600_000,
    warmStart: false,
    nodes: { count: 2, cpus: 4, memoryMiB: 8192, cpuOvercommit: 1, memoryOvercommit: 1, crashesPerNodePerDay: 0 },
    workload: { creationsPerDay: 2_000_000, burstShare: 0, cpuRequests: [[1, 1]], memoryRequestsMiB: [[512, 1]], lifetimeMedianMs: 3_600_000, lifetimeSigma: 0.1 },
    shards: 2,
    placementTimeoutMs: 200
  })
  assert.ok(s.rejected > 0, `rejected ${s.rejected}`)
  assert.is(s.peakConcurrent, 8, 'exactly the 8 CPUs of the two nodes')
  assert.is(s.created, 8)
  assert.is(s.created + s.rejected + s.overloaded + s.otherErrors + s.failedOnLostNode + s.shardErrors + s.unfinished, s.requested)
}))

test('cold starts fetch what their language reads, over the node\'s link: a slower link, slower cold starts', timed(60_000, async () => {
  const run = (blobBytesPerS: number) => runSimulation({
    seed: 5,
    durationMs: 600_000,
    warmStart: false,
    nodes: { count: 4, crashesPerNodePerDay: 0, blobBytesPerS },
    workload: { creationsPerDay: 200_000, burstShare: 0, bases: 50, languages: [{ name: 'python', weight: 1, imageBytes: 6.0e9, readShare: 0.06 }] },
    shards: 2
  })
  const fast = await run(1e15)
  const slow = await run(1e8)
  assert.ok(fast.bytesFetched > 0)
  assert.is(fast.bytesFetched % 360_000_000, 0, 'each cold start fetches 6 % of 6 GB')
  assert.is(slow.bytesFetched % 360_000_000, 0)
  assert.ok(slow.coldStartMs.p99 > fast.coldStartMs.p99, `p99 ${slow.coldStartMs.p99} vs ${fast.coldStartMs.p99}`)
  assert.ok(slow.coldStartMs.max >= 3600, `a 360 MB fetch at 100 MB/s takes 3.6 s (max ${slow.coldStartMs.max} ms)`)
  assert.ok(fast.coldStartMs.max < 1000)
}))

test('lifetimes: lognormal with a 16 min median and a p99 above 3 h; Zipf favours the first items', timed(30_000, async () => {
  const w = new Workload(5)
  const xs: number[] = []
  for (let i = 0; i < 100_000; i++) xs.push(w.spec().lifetimeMs)
  xs.sort((x, y) => x - y)
  const median = xs[50_000]! / 60_000
  const p99 = xs[99_000]! / 60_000
  assert.ok(median > 15 && median < 17, `median ${median} min`)
  assert.ok(p99 > 180, `p99 ${p99} min`)
  const rng = createRng(1)
  const z = createZipf(rng, 11_266)
  let first = 0
  for (let i = 0; i < 100_000; i++) if (z.sample() === 0) first++
  assert.ok(Math.abs(first / 100_000 - z.probability(0)) < 0.01)
  let low = 0
  let extra = 0
  for (let i = 0; i < 50_000; i++) { const s = w.spec(); if (s.cpuUse <= 0.05 * s.cpus) low++; if (s.layers.length > 1) extra++ }
  assert.ok(Math.abs(low / 50_000 - 0.9) < 0.01, `low use ${low / 50_000}`)
  assert.ok(Math.abs(extra / 50_000 - 0.678) < 0.01, `extra layers ${extra / 50_000}`)
  assert.ok(lognormal(rng, 1, 0) === 1)
}))

test('a crashed node falls silent: the registry declares it lost within its timeout, and placements meanwhile fail on it', timed(60_000, async () => {
  const s = await runSimulation({
    ...small,
    seed: 11,
    nodes: { ...small.nodes, crashesPerNodePerDay: 40 },
    heartbeatEveryMs: 2000,
    heartbeatTimeoutMs: 6000,
    registryCheckMs: 1000
  })
  assert.ok(s.nodeCrashes >= 3, `crashes ${s.nodeCrashes}`)
  assert.ok(s.lossDetectionMs.max > 0, 'losses were detected')
  // The last beat came up to 2 s before the crash; lost once silent past 6 s, at the next check
  // (every 1 s): noticed (6 - 2, 6 + 1] s after the crash.
  assert.ok(s.lossDetectionMs.p50 > 4000 && s.lossDetectionMs.max <= 7000, JSON.stringify(s.lossDetectionMs))
  assert.ok(s.failedOnLostNode > 0, 'a node down but not yet lost still gets placements, which fail')
  assert.is(s.overPromised, 0)
}))

test('killed placement shards are restarted by their supervisor and recover their nodes and what runs there', timed(60_000, async () => {
  const base = { ...small, seed: 12, nodes: { ...small.nodes, crashesPerNodePerDay: 0 } }
  const calm = await runSimulation(base)
  const stormy = await runSimulation({ ...base, shardCrashesPerDay: 48 })
  assert.ok(stormy.shardCrashes >= 4, `shard crashes ${stormy.shardCrashes}`)
  // A restarted shard that forgot what runs on its nodes would promise it again.
  assert.is(stormy.overPromised, 0)
  // Placement goes on: nearly everything asked for is still created.
  assert.ok(stormy.created > 0.95 * calm.created, `created ${stormy.created} vs ${calm.created} without crashes`)
  assert.is(stormy.created + stormy.rejected + stormy.overloaded + stormy.otherErrors + stormy.failedOnLostNode + stormy.shardErrors + stormy.unfinished, stormy.requested)
}))

test('a heartbeat timeout not above the heartbeat interval is refused', timed(10_000, async () => {
  try {
    await runSimulation({ ...small, heartbeatEveryMs: 5000, heartbeatTimeoutMs: 5000 })
    assert.unreachable('should refuse')
  } catch (err) {
    assert.is((err as { code?: string }).code, 'WARREN_ERR_INVALID_ARGUMENT')
  }
}))

test.run()
