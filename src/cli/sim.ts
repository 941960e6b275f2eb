/**
 * `warren sim`: plan a cluster before buying it. Runs the real placement code on a virtual clock
 * against a DSec-shaped workload and prints a table; `--report F.html` writes charts,
 * `--json F` the whole summary.
 *
 *   warren sim --nodes 160 --cores-per-node 187 --mem-per-node 1.5TiB --duration 24h --seed 1 --report out.html
 *   warren sim --trace events.jsonl --nodes 8          replay a create/kill trace instead
 *   warren sim --node-crashes-per-day 2 --shard-crashes-per-day 4 --heartbeat-timeout 30s
 *                                                      failures: how fast they are noticed, what they cost
 *   warren sim plan --target-concurrent 380000 --target-rate 5000 --p99-create-ms 1000
 *                                                      the smallest node count that meets the targets
 *   warren sim calibrate                               the same small scenario on the real cluster and
 *                                                      in the simulator, side by side
 */
import { writeFileSync } from 'node:fs'
import { createError, ErrorCodes } from '../errors.js'
import { runSimulation, SimulationDefaults, type Summary } from '../../sim/engine.js'
import { planCapacity } from '../../sim/plan.js'
import { readTrace } from '../../sim/trace.js'
import { htmlReport, textTable } from '../../sim/report.js'
import { calibrationTrace, compareObserved, probeCreation, replayOnCluster, simulateTrace } from '../../sim/calibrate.js'
import { ControlPlaneDefaults, type NodeStatus } from '../cluster/index.js'
import { withClient } from './client.js'
import { createProgress } from './progress.js'
import { parseDuration, parseMemory, parseNumber } from './units.js'

export interface SimFlags {
  nodes?: string
  'cores-per-node'?: string
  'mem-per-node'?: string
  duration?: string
  seed?: string
  report?: string
  json?: string
  profile?: string
  trace?: string
  'target-concurrent'?: string
  'target-rate'?: string
  'p99-create-ms'?: string
  shards?: string
  'node-crashes-per-day'?: string
  'shard-crashes-per-day'?: string
  'heartbeat-timeout'?: string
}

const num = (v: string | undefined, name: string): number | undefined =>
  v === undefined ? undefined : parseNumber(v, `--${name}`, { above: 0 })

const nonNegative = (v: string | undefined, name: string): number | undefined =>
  v === undefined ? undefined : parseNumber(v, `--${name}`, { min: 0 })

function nodeFlags (flags: SimFlags): { count?: number, cpus?: number, memoryMiB?: number, crashesPerNodePerDay?: number } {
  const crashes = nonNegative(flags['node-crashes-per-day'], 'node-crashes-per-day')
  return {
    ...(crashes !== undefined ? { crashesPerNodePerDay: crashes } : {}),
    ...(flags.nodes !== undefined ? { count: num(flags.nodes, 'nodes')! } : {}),
    ...(flags['cores-per-node'] !== undefined ? { cpus: num(flags['cores-per-node'], 'cores-per-node')! } : {}),
    ...(flags['mem-per-node'] !== undefined ? { memoryMiB: parseMemory(flags['mem-per-node'], 'mem-per-node') } : {})
  }
}

const integer = (v: string, name: string): number => {
  const n = num(v, name)!
  if (!Number.isInteger(n)) throw createError(ErrorCodes.INVALID_ARGUMENT, `--${name} must be a whole number`)
  return n
}

/** A registry timeout, with nodes beating three times within it and the registry checking twice as often. */
function heartbeats (timeoutMs: number): { heartbeatTimeoutMs: number, heartbeatEveryMs: number, registryCheckMs: number } {
  if (timeoutMs < 3) throw createError(ErrorCodes.INVALID_ARGUMENT, '--heartbeat-timeout must be at least 3ms')
  return { heartbeatTimeoutMs: timeoutMs, heartbeatEveryMs: Math.floor(timeoutMs / 3), registryCheckMs: Math.max(1, Math.floor(timeoutMs / 6)) }
}

function writeOutputs (flags: SimFlags, summary: Summary, json: unknown = summary): void {
  if (flags.report !== undefined) { writeFileSync(flags.report, htmlReport(summary)); process.stdout.write(`report: ${flags.report}\n`) }
  if (flags.json !== undefined) { writeFileSync(flags.json, JSON.stringify(json, null, 2)); process.stdout.write(`summary: ${flags.json}\n`) }
}

/** `warren sim`: one simulated run (a DSec-shaped workload or a replayed trace), printed as a table. */
export async function sim (flags: SimFlags): Promise<number> {
  if (flags.profile !== undefined && flags.profile !== 'dsec') throw createError(ErrorCodes.INVALID_ARGUMENT, 'the only profile is dsec')
  const nodes = nodeFlags(flags)
  const trace = flags.trace !== undefined ? readTrace(flags.trace) : undefined
  // A trace runs to its last event (and a second beyond), unless told otherwise.
  const durationMs = flags.duration !== undefined ? parseDuration(flags.duration, 'duration') : trace !== undefined ? Math.floor(trace.lastMs) + 1000 : undefined
  const simulated = durationMs ?? SimulationDefaults.durationMs
  const progress = createProgress(Math.max(1, Math.ceil(simulated / SimulationDefaults.progressEveryMs)))
  const summary = await runSimulation({
    nodes,
    ...(durationMs !== undefined ? { durationMs } : {}),
    ...(trace !== undefined ? { arrivals: trace, warmStart: false } : {}),
    ...(flags.seed !== undefined ? { seed: num(flags.seed, 'seed')! } : {}),
    ...(flags.shards !== undefined ? { shards: integer(flags.shards, 'shards') } : {}),
    ...(flags['shard-crashes-per-day'] !== undefined ? { shardCrashesPerDay: nonNegative(flags['shard-crashes-per-day'], 'shard-crashes-per-day')! } : {}),
    ...(flags['heartbeat-timeout'] !== undefined ? heartbeats(parseDuration(flags['heartbeat-timeout'], 'heartbeat-timeout')) : {}),
    onProgress: (p) => {
      progress.step(`${(p.simulatedMs / 3_600_000).toFixed(1)} h simulated: ${p.concurrent.toLocaleString('en')} running, ${p.created.toLocaleString('en')} created, ${p.rejected.toLocaleString('en')} rejected`)
    }
  })
  progress.done()
  process.stdout.write(textTable(summary))
  if (summary.killed !== undefined) process.stdout.write(`killed by the trace  ${summary.killed.toLocaleString('en')}\n`)
  writeOutputs(flags, summary)
  return 0
}

/** `warren sim plan`: the smallest node count that meets the targets. */
export async function plan (flags: SimFlags): Promise<number> {
  const need = (name: 'target-concurrent' | 'target-rate' | 'p99-create-ms'): number => {
    if (flags[name] === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `sim plan needs --${name}`)
    return num(flags[name], name)!
  }
  const targets = { concurrent: need('target-concurrent'), ratePerS: need('target-rate'), p99CreateMs: need('p99-create-ms') }
  const result = await planCapacity(targets, {
    nodes: nodeFlags(flags),
    ...(flags.duration !== undefined ? { durationMs: parseDuration(flags.duration, 'duration') } : {}),
    ...(flags.seed !== undefined ? { seed: num(flags.seed, 'seed')! } : {}),
    onTrial: (t) => {
      process.stderr.write(`plan: trying ${t.nodes} nodes: ${t.ok ? 'meets' : 'misses'} (${t.rejected} rejected, create p99 ${t.p99CreateMs} ms, peak ${t.peakConcurrent.toLocaleString('en')}, ${(t.wallMs / 1000).toFixed(1)} s)\n`)
    }
  })
  process.stdout.write(`nodes needed  ${result.nodes} (hardware lower bound ${result.lowerBound}; workload peak ${result.calibratedPeak.toLocaleString('en')}; ${result.trials.length} trials in ${(result.wallMs / 1000).toFixed(1)} s)\n`)
  process.stdout.write(`targets       ${targets.concurrent.toLocaleString('en')} concurrent, bursts of ${targets.ratePerS.toLocaleString('en')}/s, create p99 <= ${targets.p99CreateMs} ms\n`)
  process.stdout.write(textTable(result.summary))
  writeOutputs(flags, result.summary, { ...result })
  return 0
}

/**
 * `warren sim calibrate`: plays a small scenario (300 function sandboxes) on the cluster the
 * client is configured for, and the same in the simulator, and prints the figures side by side.
 * Needs an admin key (it reads the nodes' capacity). Exit code 1 when a figure is outside the tolerance.
 */
export async function calibrate (flags: SimFlags): Promise<number> {
  return await withClient(async (client) => {
    const nodes = (await client.nodes()) as NodeStatus[]
    const alive = nodes.filter((n) => n.alive && n.capacity.backends.includes('function'))
    if (alive.length === 0) throw createError(ErrorCodes.NO_CAPACITY, 'no live node offers the function backend')
    const progress = createProgress(3)
    progress.step(`measuring one creation on ${alive.length} node(s)`)
    const creation = await probeCreation(client)
    const trace = calibrationTrace(flags.seed !== undefined ? { seed: num(flags.seed, 'seed')! } : {})
    progress.step(`playing ${trace.creates} creations in real time (${(trace.lastMs / 1000).toFixed(1)} s)`)
    const real = await replayOnCluster(client, trace, alive)
    progress.step('playing them in the simulator')
    const simulated = await simulateTrace(trace, alive, creation, { shards: num(flags.shards, 'shards') ?? ControlPlaneDefaults.shards })
    progress.done()
    process.stdout.write(`one creation unloaded: median ${creation.medianMs.toFixed(2)} ms, sigma ${creation.sigma.toFixed(2)}\n`)
    const rows = compareObserved(real, simulated)
    for (const r of rows) process.stdout.write(`${r.ok ? 'ok  ' : 'off '} ${r.figure.padEnd(28)} real ${r.real.toFixed(2).padStart(9)}  simulated ${r.simulated.toFixed(2).padStart(9)}  allowed ±${r.allowed.toFixed(2)}\n`)
    return rows.every((r) => r.ok) && real.failed === 0 ? 0 : 1
  })
}
