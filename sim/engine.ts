/**
 * The simulation engine: the control plane's real placement side (registry, placement shards,
 * their supervisors; see control.ts) on a virtual clock, deciding where a simulated workload's
 * sandboxes go on simulated nodes.
 *
 * Nodes join the registry and heartbeat to it; a crashed node falls silent and the registry
 * declares it lost after its timeout, as in production (placements in between fail on the dead
 * node). Arrivals are batched per millisecond into one `place-now` per shard (the rest ask
 * `place`, which waits for capacity); departures send `release`. Same config and seed → same
 * summary.
 */
import { ActorSystem } from '../src/actors/index.js'
import type { BackendKind } from '../src/backends/types.js'
import { placeBatch, type BatchItem, type PlacementRequest } from '../src/cluster/placement/index.js'
import { createError, ErrorCodes, isWarrenError } from '../src/errors.js'
import { createVirtualClock } from './clock.js'
import { startSimControl } from './control.js'
import { DSecNodes, SimNode, type NodesConfig } from './nodes.js'
import { createRng, deriveSeed, exponential } from './random.js'
import { SimulationDefaults, type SimulationConfig, type Summary } from './config.js'
import { round3, Samples } from './samples.js'
import { Workload, type SandboxSpec } from './workload.js'

export type { Percentiles } from './samples.js'
export { SimulationDefaults, type Progress, type SimulationConfig, type Summary } from './config.js'

const STATE_FREE = 0
const STATE_RUNNING = 1
const STATE_CRASHED = 2
const BACKENDS: readonly BackendKind[] = ['function', 'container', 'microvm', 'fullvm']
const NO_LAYERS: string[] = []

/** One creation on its way through placement. */
interface Arrival { spec: SandboxSpec, req: PlacementRequest, resident: boolean, id: string | undefined, at: number }

export async function runSimulation (overrides: Partial<SimulationConfig> = {}): Promise<Summary> {
  const wallStart = performance.now()
  const cfg: SimulationConfig = { ...SimulationDefaults, nodes: {}, workload: {}, ...overrides }
  if (!(cfg.heartbeatTimeoutMs > cfg.heartbeatEveryMs)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, 'heartbeatTimeoutMs must exceed heartbeatEveryMs, or live nodes would be declared lost')
  }
  const nodesCfg: NodesConfig = { ...DSecNodes, ...cfg.nodes }
  const workload = new Workload(cfg.seed, cfg.workload)
  const clock = createVirtualClock()
  const system = new ActorSystem({ name: 'sim', clock })
  const serviceRng = createRng(deriveSeed(cfg.seed, 'service'))
  const crashRng = createRng(deriveSeed(cfg.seed, 'crashes'))
  const end = cfg.durationMs

  const nodes: SimNode[] = []
  const nodeById = new Map<string, SimNode>()
  const crashAt = new Float64Array(nodesCfg.count).fill(-1)
  const lossDetection = new Samples()
  const control = startSimControl(system, {
    seed: cfg.seed,
    shards: cfg.shards,
    clock,
    heartbeatTimeoutMs: cfg.heartbeatTimeoutMs,
    registryCheckMs: cfg.registryCheckMs,
    usage: (id) => nodeById.get(id)!.usage(),
    onNodeLost: (id) => {
      const node = nodeById.get(id)!
      if (!node.alive && crashAt[node.index]! >= 0) { lossDetection.push(clock.now() - crashAt[node.index]!); crashAt[node.index] = -1 }
    }
  })
  const shardOfNodeIndex: number[] = []
  const releaseOn = (node: SimNode, req: PlacementRequest): void => { control.shard(shardOfNodeIndex[node.index]!)?.tell({ type: 'release', nodeId: node.id, req }) }
  for (let i = 0; i < nodesCfg.count; i++) {
    const node = new SimNode(cfg.nodeIds?.[i] ?? `node-${i}`, i, nodesCfg)
    nodes.push(node)
    nodeById.set(node.id, node)
    shardOfNodeIndex.push(control.shardOfNode(node.id))
    control.registry()!.tell({ type: 'join', nodeId: node.id, capacity: node.capacity() })
  }
  await clock.runUntil(0) // the joins reach the shards before anything is placed

  // Sandboxes, by slot (struct of arrays: ~400,000 live at once, no object each).
  let cap = 1 << 16
  let slotNode = new Int32Array(cap)
  let slotUse = new Float64Array(cap)
  let slotCpus = new Float64Array(cap)
  let slotMem = new Float64Array(cap)
  let slotBackend = new Uint8Array(cap)
  let slotState = new Uint8Array(cap)
  const free: number[] = []
  let nextSlot = 0
  const grow = <T extends Float64Array | Int32Array | Uint8Array>(a: T, make: (n: number) => T): T => { const b = make(cap); b.set(a); return b }
  const allocSlot = (): number => {
    const f = free.pop()
    if (f !== undefined) return f
    if (nextSlot === cap) {
      cap *= 2
      slotNode = grow(slotNode, (n) => new Int32Array(n)); slotUse = grow(slotUse, (n) => new Float64Array(n))
      slotCpus = grow(slotCpus, (n) => new Float64Array(n)); slotMem = grow(slotMem, (n) => new Float64Array(n))
      slotBackend = grow(slotBackend, (n) => new Uint8Array(n)); slotState = grow(slotState, (n) => new Uint8Array(n))
    }
    return nextSlot++
  }
  const slotReq = (slot: number): PlacementRequest => ({ backend: BACKENDS[slotBackend[slot]!]!, cpus: slotCpus[slot]!, memoryMiB: slotMem[slot]!, layers: NO_LAYERS })

  // Counters.
  let requested = 0; let created = 0; let rejected = 0; let overloaded = 0; let otherErrors = 0
  let failedOnLostNode = 0; let shardErrors = 0; let shardCrashes = 0; let overPromised = 0
  let residents = 0; let crashedSandboxes = 0; let nodeCrashes = 0
  // Creations in placement now; once the run is over, late answers change nothing.
  let inPlacement = 0
  let over = false
  let concurrent = 0; let peak = 0; let peakAt = 0
  let layerHits = 0; let layerTotal = 0
  let bytesFetched = 0
  const fetchFreeAt = new Float64Array(nodesCfg.count)
  const coldStart = new Samples()
  const latency = new Samples()
  const wait = new Samples()
  const uCpuUsed = new Samples(); const uCpuReq = new Samples(); const uMem = new Samples(); const uCount = new Samples(); const uCluster = new Samples()
  const series: number[] = []

  /** A running sandbox ends: its node and its shard get its share back. */
  const endSlot = (slot: number): void => {
    const node = nodes[slotNode[slot]!]!
    const req = slotReq(slot)
    node.account(req, slotUse[slot]!, -1)
    concurrent--
    releaseOn(node, req)
  }
  const freeSlot = (i: number): void => { slotState[i] = STATE_FREE; free.push(i) }

  // Departures: one clock event per millisecond that has any.
  const departures = new Map<number, number[]>()
  const depart = (ms: number): void => {
    const list = departures.get(ms)
    departures.delete(ms)
    if (list === undefined) return
    for (const slot of list) {
      if (slotState[slot] === STATE_RUNNING) endSlot(slot)
      freeSlot(slot)
    }
  }
  const scheduleDeparture = (slot: number, at: number): void => {
    const ms = Math.ceil(at)
    if (ms > end) return // outlives the run: never departs here, costs no event
    let list = departures.get(ms)
    if (list === undefined) {
      list = []
      departures.set(ms, list)
      clock.setTimeout(() => depart(ms), ms - clock.now())
    }
    list.push(slot)
  }

  // Trace replay: ids of placed (slot) and in-flight (pending) sandboxes, and kills awaiting a placement.
  const idSlot = new Map<string, number>()
  const pending = new Set<string>()
  const killWhenPlaced = new Set<string>()
  let killed = 0
  const kill = (id: string): void => {
    if (pending.has(id)) { killWhenPlaced.add(id); return }
    const slot = idSlot.get(id)
    if (slot === undefined) return // rejected, or never asked for
    idSlot.delete(id)
    if (slotState[slot] === STATE_RUNNING) { endSlot(slot); killed++ }
    freeSlot(slot)
  }

  /** Placement chose `nodeId` for `a`: the node creates it (or cannot, being down). */
  const placed = (a: Arrival, nodeId: string): void => {
    if (over) return
    inPlacement--
    if (a.id !== undefined) pending.delete(a.id)
    const node = nodeById.get(nodeId)
    if (node === undefined) { otherErrors++; return }
    if (!node.alive) {
      // Down but not yet declared lost: the create fails, and the session gives the share back.
      failedOnLostNode++
      releaseOn(node, a.req)
      if (a.id !== undefined) killWhenPlaced.delete(a.id)
      return
    }
    const { spec, req } = a
    const now = clock.now()
    const done = a.resident ? now : node.create(now, spec.backend, serviceRng)
    // A node without the image fetches what the cold start reads over its link to the blob
    // store, fetches on one node taking turns. Layers load on demand, so this delays the first
    // command's reads, not the creation: it is measured apart, as the cold start.
    if (!a.resident && spec.coldReadBytes > 0 && spec.layers[0] !== undefined && !node.layers.has(spec.layers[0])) {
      const start = Math.max(done, fetchFreeAt[node.index]!)
      const fetched = start + (spec.coldReadBytes / nodesCfg.blobBytesPerS) * 1000
      fetchFreeAt[node.index] = fetched
      coldStart.push(fetched - a.at)
      bytesFetched += spec.coldReadBytes
    }
    layerHits += node.pull(spec.layers); layerTotal += spec.layers.length
    if (node.layers.size > cfg.layerCacheSize) {
      const it = node.layers.values() // a Set keeps insertion order: the oldest go first
      for (let n = node.layers.size - cfg.layerCacheSize; n > 0; n--) node.layers.delete(it.next().value!)
    }
    if (a.resident) residents++
    else { created++; wait.push(now - a.at); latency.push(done - a.at) }
    const slot = allocSlot()
    slotNode[slot] = node.index; slotUse[slot] = spec.cpuUse; slotCpus[slot] = req.cpus; slotMem[slot] = req.memoryMiB
    slotBackend[slot] = BACKENDS.indexOf(req.backend); slotState[slot] = STATE_RUNNING
    node.account(req, spec.cpuUse, 1)
    if (node.overPromised()) overPromised++
    concurrent++
    if (concurrent > peak) { peak = concurrent; peakAt = now }
    if (a.id !== undefined) {
      idSlot.set(a.id, slot)
      if (killWhenPlaced.delete(a.id)) kill(a.id)
      return
    }
    scheduleDeparture(slot, done + a.spec.lifetimeMs)
  }
  const failed = (a: Arrival, err: unknown): void => {
    if (over) return
    inPlacement--
    if (a.resident) return // the steady state is more than the cluster holds: the rest are simply not there
    if (a.id !== undefined) { pending.delete(a.id); killWhenPlaced.delete(a.id) }
    if (isWarrenError(err, ErrorCodes.NO_CAPACITY)) rejected++
    else if (isWarrenError(err, ErrorCodes.OVERLOADED)) overloaded++
    else if (isWarrenError(err, ErrorCodes.ACTOR_STOPPED) || isWarrenError(err, ErrorCodes.NO_SUCH_ACTOR)) shardErrors++
    else otherErrors++
  }
  // Arrivals of one millisecond are placed as a session places a batch (placeBatch: one
  // place-now per shard, `place` for what did not fit), each at the shard a session would choose.
  // The shards answer every place by its deadline (NO_CAPACITY at worst), so asks need no timer
  // of their own: millions of idle timers would only weigh on the virtual clock.
  let arrivals: Arrival[] = []
  const issue = (at: number, resident: boolean, traced?: SandboxSpec, id?: string): void => {
    const spec = traced ?? (resident ? workload.residentSpec() : workload.spec())
    if (id !== undefined) pending.add(id)
    if (!resident) requested++
    inPlacement++
    arrivals.push({ spec, req: { backend: spec.backend, cpus: spec.cpus, memoryMiB: spec.memoryMiB, layers: spec.layers }, resident, id, at })
  }
  const flush = (): void => {
    const items: BatchItem[] = []
    const placing: Arrival[] = []
    for (const a of arrivals) {
      const shard = control.shard(control.shardForSandbox(a.req, a.id ?? ''))
      if (shard === undefined) { failed(a, createError(ErrorCodes.ACTOR_STOPPED, 'placement is restarting')); continue }
      items.push({ shard, req: a.req, deadline: a.at + cfg.placementTimeoutMs })
      placing.push(a)
    }
    arrivals = []
    placeBatch(items, () => Infinity).forEach((p, k) => {
      const a = placing[k]!
      p.then((r) => placed(a, r.nodeId), (err: unknown) => failed(a, err))
    })
  }

  // Arrivals: one clock event per millisecond that has any.
  const source = cfg.arrivals
  const scheduleArrivals = (): void => {
    const t = source !== undefined ? source.peek() : workload.peek()
    if (t > end) return
    clock.setTimeout(fireArrivals, Math.floor(t) - clock.now())
  }
  const fireArrivals = (): void => {
    const now = clock.now()
    if (source !== undefined) {
      while (source.peek() < now + 1) {
        const ev = source.take()
        if (ev.op === 'create') issue(now, false, ev.spec, ev.id)
        else kill(ev.id)
      }
    } else {
      while (workload.peek() < now + 1) issue(now, false), workload.take()
    }
    flush()
    scheduleArrivals()
  }

  // Node crashes: the node falls silent (no heartbeats) and its sandboxes end; the registry
  // notices after its timeout. Repaired, the node joins again, empty.
  const crashTime = (): number => nodesCfg.crashesPerNodePerDay > 0 ? exponential(crashRng, 86_400_000 / nodesCfg.crashesPerNodePerDay) : Infinity
  const scheduleCrash = (node: SimNode, after: number): void => {
    if (clock.now() + after > end) return
    clock.setTimeout(() => {
      nodeCrashes++
      crashAt[node.index] = clock.now()
      for (let s = 0; s < nextSlot; s++) {
        if (slotState[s] === STATE_RUNNING && slotNode[s] === node.index) { slotState[s] = STATE_CRASHED; concurrent--; crashedSandboxes++ }
      }
      node.crash()
      clock.setTimeout(() => {
        node.alive = true
        crashAt[node.index] = -1
        control.registry()?.tell({ type: 'join', nodeId: node.id, capacity: node.capacity() })
        scheduleCrash(node, crashTime())
      }, nodesCfg.repairMs)
    }, after)
  }
  for (const node of nodes) scheduleCrash(node, crashTime())

  // Placement shards killed now and then: their supervisor restarts them, and they recover.
  const shardCrashTime = (): number => cfg.shardCrashesPerDay > 0 ? exponential(crashRng, 86_400_000 / cfg.shardCrashesPerDay) : Infinity
  const scheduleShardCrash = (i: number, after: number): void => {
    if (clock.now() + after > end) return
    clock.setTimeout(() => { shardCrashes++; control.crashShard(i); scheduleShardCrash(i, shardCrashTime()) }, after)
  }
  for (let i = 0; i < cfg.shards; i++) scheduleShardCrash(i, shardCrashTime())

  // Heartbeats, all nodes at one instant; some carry the node's cached layers for locality.
  const layerEvery = cfg.layerReportMs > 0 ? Math.max(1, Math.round(cfg.layerReportMs / cfg.heartbeatEveryMs)) : 0
  let beats = 0
  const heartbeat = (): void => {
    const withLayers = layerEvery > 0 && ++beats % layerEvery === 0
    const registry = control.registry()
    for (const node of nodes) {
      if (!node.alive) continue
      registry?.tell({ type: 'heartbeat', nodeId: node.id, ...(withLayers ? { layers: [...node.layers] } : {}) })
    }
    if (clock.now() + cfg.heartbeatEveryMs <= end) clock.setTimeout(heartbeat, cfg.heartbeatEveryMs)
  }
  clock.setTimeout(heartbeat, cfg.heartbeatEveryMs)

  // Sampling.
  const sample = (): void => {
    series.push(concurrent)
    let reqCpus = 0; let cores = 0
    for (const node of nodes) {
      if (!node.alive) continue
      reqCpus += node.reqCpus; cores += nodesCfg.cpus
      uCpuUsed.push(node.useCpus / nodesCfg.cpus)
      uCpuReq.push(node.reqCpus / nodesCfg.cpus)
      uMem.push(node.memoryMiB / nodesCfg.memoryMiB)
      uCount.push(node.sandboxes / (nodesCfg.maxSandboxes[workload.config.backend] ?? Infinity))
    }
    if (cores > 0) uCluster.push(reqCpus / cores)
    if (clock.now() + cfg.sampleEveryMs <= end) clock.setTimeout(sample, cfg.sampleEveryMs)
  }
  clock.setTimeout(sample, cfg.sampleEveryMs)

  // Warm start: the steady-state population, placed at time 0 (not counted as creations).
  if (cfg.warmStart && source === undefined) {
    const n = workload.steadyStateConcurrent()
    for (let i = 0; i < n; i++) issue(0, true)
    flush()
  }
  scheduleArrivals()

  try {
    for (let t = 0; t < end;) {
      t = Math.min(end, t + cfg.progressEveryMs)
      await clock.runUntil(t)
      cfg.onProgress?.({ simulatedMs: t, concurrent, created, rejected, events: clock.events, wallMs: performance.now() - wallStart })
    }
    // Let the last replies settle.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    over = true
    await system.shutdown(0)
  }

  return {
    seed: cfg.seed,
    simulatedMs: end,
    nodes: nodesCfg.count,
    shards: cfg.shards,
    requested,
    created,
    rejected,
    overloaded,
    failedOnLostNode,
    shardErrors,
    otherErrors,
    unfinished: inPlacement,
    residents,
    crashedSandboxes,
    nodeCrashes,
    lossDetectionMs: lossDetection.percentiles(),
    shardCrashes,
    overPromised,
    peakConcurrent: peak,
    peakAtMs: peakAt,
    endConcurrent: concurrent,
    createLatencyMs: latency.percentiles(),
    placementWaitMs: wait.percentiles(),
    utilisation: { cpuUsed: uCpuUsed.percentiles(), cpuRequested: uCpuReq.percentiles(), memoryRequested: uMem.percentiles(), sandboxesOfCap: uCount.percentiles(), clusterCpuRequested: uCluster.percentiles() },
    layerCacheHitRatio: layerTotal === 0 ? 0 : round3(layerHits / layerTotal),
    bytesFetched,
    coldStartMs: coldStart.percentiles(),
    concurrent: { everyMs: cfg.sampleEveryMs, values: series },
    events: clock.events,
    wallMs: Math.round(performance.now() - wallStart),
    ...(source !== undefined ? { killed } : {})
  }
}
