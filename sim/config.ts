/**
 * What a simulation is asked (SimulationConfig, with its defaults) and what it answers (Summary).
 */
import type { NodesConfig } from './nodes.js'
import type { Percentiles } from './samples.js'
import type { ArrivalSource } from './trace.js'
import type { WorkloadConfig } from './workload.js'

export interface SimulationConfig {
  seed: number
  durationMs: number
  nodes: Partial<NodesConfig>
  workload: Partial<WorkloadConfig>
  /** Placement shards (like the control plane's). */
  shards: number
  /** Node ids (default `node-0` …): a calibration names them as the real cluster does, so shards own the same nodes. */
  nodeIds?: string[]
  /** How long a creation may wait for capacity before NO_CAPACITY. */
  placementTimeoutMs: number
  /** Start from the steady state (sandboxes already running, Little's law) instead of empty. */
  warmStart: boolean
  /** How often concurrency and node utilisation are sampled. */
  sampleEveryMs: number
  /** Nodes heartbeat this often; the registry declares a node lost after `heartbeatTimeoutMs` of silence, checking every `registryCheckMs`. */
  heartbeatEveryMs: number
  heartbeatTimeoutMs: number
  registryCheckMs: number
  /** How often heartbeats carry the node's cached layers (0: never); each node caches `layerCacheSize` layers (LRU). */
  layerReportMs: number
  layerCacheSize: number
  /** Placement shards killed per shard per day (their supervisor restarts them). */
  shardCrashesPerDay: number
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
  /** Placed on a node that had crashed but was not yet declared lost: the creation failed. */
  failedOnLostNode: number
  /** Failed because their placement shard was down (killed, being restarted). */
  shardErrors: number
  otherErrors: number
  /** Still waiting for placement when the run ended. */
  unfinished: number
  residents: number
  /** Sandboxes ended by their node crashing, and the crashes. */
  crashedSandboxes: number
  nodeCrashes: number
  /** From a node's crash until the registry declares it lost, ms. */
  lossDetectionMs: Percentiles
  shardCrashes: number
  /** Placements that left a node holding more than it may promise (0 unless placement is wrong). */
  overPromised: number
  peakConcurrent: number
  peakAtMs: number
  endConcurrent: number
  /** Creation latency: placement wait plus the node's creation (queue + service), ms. */
  createLatencyMs: Percentiles
  placementWaitMs: Percentiles
  /** Node utilisation over all (node, sample) pairs, as shares of the node's hardware. */
  utilisation: { cpuUsed: Percentiles, cpuRequested: Percentiles, memoryRequested: Percentiles, sandboxesOfCap: Percentiles, clusterCpuRequested: Percentiles }
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
  // Slower than production's 500 ms / 3 s: a day of 160 nodes' beats stays ~1.4 M messages.
  heartbeatEveryMs: 10_000,
  heartbeatTimeoutMs: 30_000,
  registryCheckMs: 5_000,
  layerReportMs: 600_000,
  layerCacheSize: 2000,
  shardCrashesPerDay: 0,
  progressEveryMs: 3_600_000
}
