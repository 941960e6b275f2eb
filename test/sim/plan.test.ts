import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { runSimulation, SimulationDefaults } from '../../sim/engine.js'
import { DSecNodes } from '../../sim/nodes.js'
import { lowerBound, planCapacity } from '../../sim/plan.js'
import { DSecWorkload } from '../../sim/workload.js'
import { timed } from '../support/index.js'

test('plan finds the count where one node fewer fails and it succeeds', timed(120_000, async () => {
  const targets = { concurrent: 2000, ratePerS: 200, p99CreateMs: 1000 }
  const nodes = { cpus: 16, memoryMiB: 64 * 1024 }
  const plan = await planCapacity(targets, { seed: 3, nodes })
  assert.ok(plan.nodes >= plan.lowerBound, `${plan.nodes} >= ${plan.lowerBound}`)
  assert.ok(plan.calibratedPeak >= 2000 && plan.calibratedPeak < 2200, `peak ${plan.calibratedPeak}`)
  assert.is(plan.workload.burstRatePerS, 200)
  assert.is(plan.summary.nodes, plan.nodes)
  const trial = (count: number) => runSimulation({
    ...SimulationDefaults, progressEveryMs: plan.summary.simulatedMs, seed: 3, durationMs: plan.summary.simulatedMs,
    nodes: { ...DSecNodes, crashesPerNodePerDay: 0, ...nodes, count }, workload: plan.workload
  })
  const meets = (s: Awaited<ReturnType<typeof trial>>): boolean => s.rejected + s.overloaded + s.otherErrors === 0 && s.createLatencyMs.p99 <= targets.p99CreateMs
  const at = await trial(plan.nodes)
  const below = await trial(plan.nodes - 1)
  assert.ok(meets(at), `${plan.nodes} nodes: ${at.rejected} rejected, p99 ${at.createLatencyMs.p99}`)
  assert.not.ok(meets(below), `${plan.nodes - 1} nodes met the targets too`)
  assert.is(at.peakConcurrent, plan.summary.peakConcurrent, 'the plan\'s run is reproducible')
}))

test('a tight latency bound needs more nodes than the hardware bound; an impossible one is refused', timed(120_000, async () => {
  const nodes = { cpus: 16, memoryMiB: 64 * 1024, serviceMs: { container: 50 } }
  const loose = await planCapacity({ concurrent: 1000, ratePerS: 400, p99CreateMs: 5000 }, { seed: 1, nodes, durationMs: 3_600_000 })
  const tight = await planCapacity({ concurrent: 1000, ratePerS: 400, p99CreateMs: 150 }, { seed: 1, nodes, durationMs: 3_600_000 })
  assert.ok(tight.nodes > loose.nodes, `tight ${tight.nodes} vs loose ${loose.nodes}`)
  assert.ok(tight.summary.createLatencyMs.p99 <= 150)
  assert.is(lowerBound(1000, { ...DSecNodes, ...nodes }, DSecWorkload), loose.lowerBound)
  try {
    await planCapacity({ concurrent: 1000, ratePerS: 400, p99CreateMs: 1 }, { seed: 1, nodes, durationMs: 600_000, maxNodes: 40 })
    assert.unreachable('a 1 ms p99 with 50 ms creations was met')
  } catch (err) {
    assert.match((err as Error).message, /no node count up to 40/)
  }
}))

test.run()
