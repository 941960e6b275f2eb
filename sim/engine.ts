/**
 * The simulation engine: the real PlacementShard actors, on a virtual clock, deciding where a
 * simulated workload's sandboxes go on simulated nodes. Arrivals and departures are events on
 * the clock (batched per millisecond, so a day of 3 M creations stays a few million events);
 * placement is asked exactly as the control plane asks it; departures send `release`; node
 * crashes send `node-lost` and end the node's sandboxes. Same config and seed → same summary.
 */
import { ActorSystem, type Ref } from '../src/actors/index.js'
import { createPlacementShard, type PlacementRequest, type ShardMessage } from '../src/cluster/placement/index.js'
import { shardOf } from '../src/cluster/control/registry.js'
import { ErrorCodes, isWarrenError } from '../src/errors.js'
import { createVirtualClock } from './clock.js'
import { DSecNodes, SimNode, type NodesConfig } from './nodes.js'
import { createRng, deriveSeed, exponential } from './random.js'
import { Workload, type SandboxSpec, type WorkloadConfig } from './workload.js'
import type { ArrivalSource } from './trace.js'

export interface SimulationConfig {
  seed: number
  durationMs: number
  nodes: Partial<NodesConfig>
  workload: Partial<WorkloadConfig>
  /** Placement shards (like the control plane's). */
  shards: number
  /** How long a creation may wait for capacity before NO_CAPACITY. */
  placementTimeoutMs: number
  /** Start from the steady state (sandboxes already running, Little's law) instead of empty. */
  warmStart: boolean
  /** How often concurrency and node utilisation are sampled. */
  sampleEveryMs: number
  /** How often nodes report their cached layers to placement (0: never); each node caches `layerCacheSize` layers (LRU). */
  layerReportMs: number
  layerCacheSize: number
  /** Called every `progressEveryMs` of simulated time. */
  progressEveryMs: number
  onProgress?: (p: Progress) => void
  /**
   * Where creations and kills come from instead of the generated workload (a trace replay).
   * When given, there is no warm start and the workload only names the backend for the caps.
   */
  arrivals?: ArrivalSource
}

export interface Progress { simulatedMs: number, concurrent: number, created: number, rejected: number, events: number, wallMs: number }

export interface Percentiles { p50: number, p90: number, p99: number, max: number }

export interface Summary {
  seed: number
  simulatedMs: number
  nodes: number
  shards: number
  /** Creations asked for during the run (not counting the warm-start residents). */
  requested: number
  created: number
  rejected: number
  overloaded: number
  otherErrors: number
  residents: number
  /** Sandboxes ended by their node crashing, and the crashes. */
  crashedSandboxes: number
  nodeCrashes: number
  peakConcurrent: number
  peakAtMs: number
  endConcurrent: number
  /** Creation latency: placement wait plus the node's creation (queue + service), ms. */
  createLatencyMs: Percentiles
  placementWaitMs: Percentiles
  /** Node utilisation over all (node, sample) pairs, as shares of the node's hardware. */
  utilisation: { cpuUsed: Percentiles, cpuRequested: Percentiles, memoryRequested: Percentiles, sandboxesOfCap: Percentiles }
  /** Share of requested layers already cached on the chosen node. */
  layerCacheHitRatio: number
  /** Bytes cold starts fetched from the blob store (image size × the language's read share). */
  bytesFetched: number
  /** Cold starts (node without the image): from arrival until the start's reads are fetched, ms. */
  coldStartMs: Percentiles
  /** Concurrent sandboxes at each sample. */
  concurrent: { everyMs: number, values: number[] }
  /** Virtual-clock events handled. */
  events: number
  wallMs: number
  /** Sandboxes ended by a kill event (trace replay only). */
  killed?: number
}

export const SimulationDefaults: Omit<SimulationConfig, 'nodes' | 'workload'> = {
  seed: 1,
  durationMs: 86_400_000,
  shards: 4,
  placementTimeoutMs: 1000,
  warmStart: true,
  sampleEveryMs: 60_000,
  layerReportMs: 600_000,
  layerCacheSize: 2000,
  progressEveryMs: 3_600_000
}

const STATE_FREE = 0
const STATE_RUNNING = 1
const STATE_CRASHED = 2

/** A growable float array for samples. */
class Samples {
  private a = new Float64Array(1024)
  length = 0
  push (v: number): void {
    if (this.length === this.a.length) { const b = new Float64Array(this.a.length * 2); b.set(this.a); this.a = b }
    this.a[this.length++] = v
  }

  percentiles (): Percentiles {
    if (this.length === 0) return { p50: 0, p90: 0, p99: 0, max: 0 }
    const s = this.a.subarray(0, this.length).sort()
    const q = (p: number): number => round3(s[Math.min(s.length - 1, Math.floor(p * s.length))]!)
    return { p50: q(0.5), p90: q(0.9), p99: q(0.99), max: round3(s[s.length - 1]!) }
  }
}

function round3 (v: number): number { return Math.round(v * 1000) / 1000 }

export async function runSimulation (overrides: Partial<SimulationConfig> = {}): Promise<Summary> {
  const wallStart = performance.now()
  const cfg: SimulationConfig = { ...SimulationDefaults, nodes: {}, workload: {}, ...overrides }
  const nodesCfg: NodesConfig = { ...DSecNodes, ...cfg.nodes }
  const workload = new Workload(cfg.seed, cfg.workload)
  const clock = createVirtualClock()
  const system = new ActorSystem({ clock })
  const rng = createRng(deriveSeed(cfg.seed, 'engine'))
  const serviceRng = createRng(deriveSeed(cfg.seed, 'service'))
  const crashRng = createRng(deriveSeed(cfg.seed, 'crashes'))

  // The real placement shards, on the virtual clock, with seeded randomness.
  const shards: Array<Ref<ShardMessage>> = []
  for (let i = 0; i < cfg.shards; i++) {
    const shardRng = createRng(deriveSeed(cfg.seed, `shard-${i}`))
    shards.push(system.spawn(createPlacementShard({ now: () => clock.now(), random: shardRng, peers: () => shards }), {
      name: `placement-${i}`,
      mailbox: { capacity: 2_000_000 }
    }) as Ref<ShardMessage>)
  }

  const nodes: SimNode[] = []
  const nodeById = new Map<string, SimNode>()
  const nodeShard: number[] = []
  for (let i = 0; i < nodesCfg.count; i++) {
    const node = new SimNode(`node-${i}`, i, nodesCfg)
    nodes.push(node)
    nodeById.set(node.id, node)
    nodeShard.push(shardOf(node.id, cfg.shards))
    shards[nodeShard[i]!]!.tell({ type: 'node-up', id: node.id, capacity: node.capacity() })
  }

  // Sandboxes, by slot (struct of arrays: ~400,000 live at once).
  let cap = 1 << 16
  let slotNode = new Int32Array(cap)
  let slotUse = new Float64Array(cap)
  let slotState = new Uint8Array(cap)
  let slotReq: Array<PlacementRequest | undefined> = new Array(cap)
  const free: number[] = []
  let nextSlot = 0
  const allocSlot = (): number => {
    const f = free.pop()
    if (f !== undefined) return f
    if (nextSlot === cap) {
      cap *= 2
      const n = new Int32Array(cap); n.set(slotNode); slotNode = n
      const u = new Float64Array(cap); u.set(slotUse); slotUse = u
      const s = new Uint8Array(cap); s.set(slotState); slotState = s
      slotReq.length = cap
    }
    return nextSlot++
  }
  const freeSlot = (i: number): void => { slotState[i] = STATE_FREE; slotReq[i] = undefined; free.push(i) }

  // Counters.
  let requested = 0; let created = 0; let rejected = 0; let overloaded = 0; let otherErrors = 0
  let residents = 0; let crashedSandboxes = 0; let nodeCrashes = 0
  let concurrent = 0; let peak = 0; let peakAt = 0
  let layerHits = 0; let layerTotal = 0
  let bytesFetched = 0
  const fetchFreeAt: number[] = []
  const coldStart = new Samples()
  const latency = new Samples()
  const wait = new Samples()
  const uCpuUsed = new Samples(); const uCpuReq = new Samples(); const uMem = new Samples(); const uCount = new Samples()
  const series: number[] = []
  const end = cfg.durationMs

  // Departures: one clock event per millisecond that has any.
  const departures = new Map<number, number[]>()
  const depart = (ms: number): void => {
    const list = departures.get(ms)
    departures.delete(ms)
    if (list === undefined) return
    for (const slot of list) {
      if (slotState[slot] === STATE_RUNNING) {
        const node = nodes[slotNode[slot]!]!
        const req = slotReq[slot]!
        node.reqCpus -= req.cpus; node.useCpus -= slotUse[slot]!; node.memoryMiB -= req.memoryMiB; node.sandboxes--
        concurrent--
        shards[nodeShard[node.index]!]!.tell({ type: 'release', nodeId: node.id, req })
      }
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

  // The shard answers every place by its deadline (NO_CAPACITY at worst), so the ask needs no
  // timer of its own: three million idle timers would only weigh on the virtual clock.
  const askTimeoutMs = Infinity
  let rr = 0
  // Trace replay: ids of placed (slot) and in-flight (pending) sandboxes, and kills awaiting a reply.
  const idSlot = new Map<string, number>()
  const pending = new Set<string>()
  const killWhenPlaced = new Set<string>()
  let killed = 0
  const endSlot = (slot: number): void => {
    const node = nodes[slotNode[slot]!]!
    const req = slotReq[slot]!
    node.reqCpus -= req.cpus; node.useCpus -= slotUse[slot]!; node.memoryMiB -= req.memoryMiB; node.sandboxes--
    concurrent--
    shards[nodeShard[node.index]!]!.tell({ type: 'release', nodeId: node.id, req })
  }
  const kill = (id: string): void => {
    if (pending.has(id)) { killWhenPlaced.add(id); return }
    const slot = idSlot.get(id)
    if (slot === undefined) return // rejected, or never asked for
    idSlot.delete(id)
    if (slotState[slot] === STATE_RUNNING) { endSlot(slot); killed++ }
    freeSlot(slot)
  }

  const issue = (arrivalMs: number, resident: boolean, traced?: SandboxSpec, id?: string): void => {
    const spec = traced ?? (resident ? workload.residentSpec() : workload.spec())
    if (id !== undefined) pending.add(id)
    const req: PlacementRequest = { backend: spec.backend, cpus: spec.cpus, memoryMiB: spec.memoryMiB, layers: spec.layers }
    if (!resident) requested++
    const shard = shards[rr]!
    rr = (rr + 1) % shards.length
    shard.ask<{ nodeId: string | undefined }>({ type: 'place', req, deadline: arrivalMs + cfg.placementTimeoutMs }, { timeoutMs: askTimeoutMs }).then((r) => {
      if (id !== undefined) pending.delete(id)
      const node = r.nodeId === undefined ? undefined : nodeById.get(r.nodeId)
      if (node === undefined) { otherErrors++; return }
      if (!node.alive) { crashedSandboxes++; return } // the node went down between decision and creation
      const now = clock.now()
      const done = resident ? now : node.create(now, spec.backend, serviceRng)
      // A node without the image fetches what the cold start reads, over its link to the blob
      // store, fetches on one node taking turns. Layers load on demand, so this delays the first
      // command's reads, not the creation: it is measured apart, as the cold start.
      if (!resident && spec.coldReadBytes > 0 && spec.layers[0] !== undefined && !node.layers.has(spec.layers[0])) {
        const start = Math.max(done, fetchFreeAt[node.index] ?? 0)
        const end = start + (spec.coldReadBytes / nodesCfg.blobBytesPerS) * 1000
        fetchFreeAt[node.index] = end
        coldStart.push(end - arrivalMs)
        bytesFetched += spec.coldReadBytes
      }
      const hits = node.pull(spec.layers)
      layerHits += hits; layerTotal += spec.layers.length
      if (node.layers.size > cfg.layerCacheSize) {
        // Evict least recently inserted (Set keeps insertion order).
        const it = node.layers.values()
        for (let n = node.layers.size - cfg.layerCacheSize; n > 0; n--) node.layers.delete(it.next().value!)
      }
      if (resident) residents++
      else {
        created++
        wait.push(now - arrivalMs)
        latency.push(done - arrivalMs)
      }
      const slot = allocSlot()
      slotNode[slot] = node.index; slotUse[slot] = spec.cpuUse; slotState[slot] = STATE_RUNNING; slotReq[slot] = req
      node.reqCpus += req.cpus; node.useCpus += spec.cpuUse; node.memoryMiB += req.memoryMiB; node.sandboxes++
      concurrent++
      if (concurrent > peak) { peak = concurrent; peakAt = now }
      if (id !== undefined) {
        idSlot.set(id, slot)
        if (killWhenPlaced.delete(id)) kill(id)
        return
      }
      scheduleDeparture(slot, done + spec.lifetimeMs)
    }, (err: unknown) => {
      if (id !== undefined) { pending.delete(id); killWhenPlaced.delete(id) }
      if (isWarrenError(err, ErrorCodes.NO_CAPACITY)) rejected++
      else if (isWarrenError(err, ErrorCodes.OVERLOADED)) overloaded++
      else otherErrors++
    })
  }

  // Arrivals: one clock event per millisecond that has any.
  const source = cfg.arrivals
  const scheduleArrivals = (): void => {
    const t = source !== undefined ? source.peek() : workload.peek()
    if (t > end) return
    const ms = Math.floor(t)
    clock.setTimeout(fireArrivals, ms - clock.now())
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
    scheduleArrivals()
  }

  // Node crashes and repairs.
  const crashTime = (): number => nodesCfg.crashesPerNodePerDay > 0 ? exponential(crashRng, 86_400_000 / nodesCfg.crashesPerNodePerDay) : Infinity
  const scheduleCrash = (node: SimNode, after: number): void => {
    if (clock.now() + after > end) return
    clock.setTimeout(() => {
      nodeCrashes++
      shards[nodeShard[node.index]!]!.tell({ type: 'node-lost', id: node.id })
      for (let s = 0; s < nextSlot; s++) {
        if (slotState[s] === STATE_RUNNING && slotNode[s] === node.index) { slotState[s] = STATE_CRASHED; concurrent--; crashedSandboxes++ }
      }
      node.crash()
      clock.setTimeout(() => {
        node.alive = true
        shards[nodeShard[node.index]!]!.tell({ type: 'node-up', id: node.id, capacity: node.capacity() })
        scheduleCrash(node, crashTime())
      }, nodesCfg.repairMs)
    }, after)
  }
  for (const node of nodes) scheduleCrash(node, crashTime())

  // Layer reports, as the registry forwards heartbeats.
  if (cfg.layerReportMs > 0) {
    const report = (): void => {
      for (const node of nodes) if (node.alive) shards[nodeShard[node.index]!]!.tell({ type: 'node-layers', id: node.id, layers: [...node.layers] })
      if (clock.now() + cfg.layerReportMs <= end) clock.setTimeout(report, cfg.layerReportMs)
    }
    clock.setTimeout(report, cfg.layerReportMs)
  }

  // Sampling.
  const sample = (): void => {
    series.push(concurrent)
    for (const node of nodes) {
      if (!node.alive) continue
      uCpuUsed.push(node.useCpus / nodesCfg.cpus)
      uCpuReq.push(node.reqCpus / nodesCfg.cpus)
      uMem.push(node.memoryMiB / nodesCfg.memoryMiB)
      uCount.push(node.sandboxes / (nodesCfg.maxSandboxes[workload.config.backend] ?? Infinity))
    }
    if (clock.now() + cfg.sampleEveryMs <= end) clock.setTimeout(sample, cfg.sampleEveryMs)
  }
  clock.setTimeout(sample, cfg.sampleEveryMs)

  // Warm start: the steady-state population, placed at time 0 (not counted as creations).
  if (cfg.warmStart && source === undefined) {
    const n = workload.steadyStateConcurrent()
    for (let i = 0; i < n; i++) issue(0, true)
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
    await system.shutdown(0)
  }
  void rng

  return {
    seed: cfg.seed,
    simulatedMs: end,
    nodes: nodesCfg.count,
    shards: cfg.shards,
    requested,
    created,
    rejected,
    overloaded,
    otherErrors,
    residents,
    crashedSandboxes,
    nodeCrashes,
    peakConcurrent: peak,
    peakAtMs: peakAt,
    endConcurrent: concurrent,
    createLatencyMs: latency.percentiles(),
    placementWaitMs: wait.percentiles(),
    utilisation: { cpuUsed: uCpuUsed.percentiles(), cpuRequested: uCpuReq.percentiles(), memoryRequested: uMem.percentiles(), sandboxesOfCap: uCount.percentiles() },
    layerCacheHitRatio: layerTotal === 0 ? 0 : round3(layerHits / layerTotal),
    bytesFetched,
    coldStartMs: coldStart.percentiles(),
    concurrent: { everyMs: cfg.sampleEveryMs, values: series },
    events: clock.events,
    wallMs: Math.round(performance.now() - wallStart),
    ...(source !== undefined ? { killed } : {})
  }
}
