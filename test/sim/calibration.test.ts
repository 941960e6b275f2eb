import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ControlPlaneDefaults, type NodeStatus } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { calibrationTrace, CalibrationDefaults, compareObserved, probeCreation, replayOnCluster, simulateTrace } from '../../sim/calibrate.js'
import { timed } from '../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from '../cluster/harness.js'

// What is asserted is what placement decides: the CPU requested in the cluster and per node, and the
// peak concurrency. Latency is printed beside them and not asserted: it follows the load of this
// shared machine at the moment (CI once probed a spread of 1.12 and then ran with a real p99 a fifth
// of the simulated one); `warren sim calibrate` and its tolerances are for a cluster of one's own.
test('calibration: the same 300 creations on 2 real node agents and in the simulator place alike within the stated tolerance', timed(120_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  for (const id of ['n1', 'n2']) {
    const dir = mkdtempSync(join(tmpdir(), 'warren-calibration-'))
    defer(() => rmSync(dir, { recursive: true, force: true }))
    const node = await spawnNode(cp, id, dir)
    defer(() => node.kill())
  }
  const client = await connect({ url: cp.url, token: await cp.createToken('calibration', [...ALL_SCOPES, 'admin']) })
  defer(() => client.close())
  const nodes = (await client.nodes()) as NodeStatus[]
  assert.is(nodes.length, 2)

  const creation = await probeCreation(client)
  const trace = calibrationTrace()
  assert.is(trace.creates, CalibrationDefaults.creations)
  const real = await replayOnCluster(client, trace, nodes)
  const simulated = await simulateTrace(trace, nodes, creation, { shards: ControlPlaneDefaults.shards })

  const rows = compareObserved(real, simulated)
  process.stdout.write(`\n  one creation unloaded: median ${creation.medianMs.toFixed(2)} ms, sigma ${creation.sigma.toFixed(2)}\n`)
  for (const r of rows) process.stdout.write(`  ${r.ok ? 'ok  ' : r.timing ? 'off ' : 'FAIL'} ${r.figure.padEnd(28)} real ${r.real.toFixed(2).padStart(8)}  simulated ${r.simulated.toFixed(2).padStart(8)}  allowed ±${r.allowed.toFixed(2)}\n`)
  assert.is(real.failed, 0, 'every real creation succeeded')
  assert.is(simulated.failed, 0, 'every simulated creation succeeded')
  assert.is(real.created, simulated.created)
  assert.ok(rows.filter((r) => r.timing).every((r) => r.real > 0 && r.simulated > 0), 'both sides measured every latency')
  const off = rows.filter((r) => !r.ok && !r.timing)
  assert.is(off.length, 0, `outside the tolerance: ${off.map((r) => `${r.figure} real ${r.real} simulated ${r.simulated}`).join('; ')}`)
}))

test.run()
