/**
 * `cluster-stats` (admin): what the live page shows of the cluster in one answer — each node with
 * its capacity and what its live sandboxes were given, the layers each caches, and the creations
 * of the last minutes. Read from the registry, the directory and the creation series; nothing
 * here is kept beyond the answer.
 */
import type { Ref } from '../../actors/index.js'
import type { NodeCapacity, NodeUsage } from '../placement/index.js'
import type { CreationPoint, CreationSeries } from './creation-series.js'
import type { DirectoryMessage } from './directory.js'
import type { NodeStatus, RegistryMessage } from './registry.js'

export const ClusterStatsDefaults = {
  /** Seconds of creations an answer carries unless `windowSec` says otherwise. */
  windowSec: 600,
  /** Nodes one answer lists (the rest are counted in `nodesOmitted`), so it fits a frame. */
  maxNodes: 2000
}

/** One node as the page shows it. */
export interface NodeFigures {
  id: string
  alive: boolean
  lastSeenMs: number
  shard: number
  capacity: NodeCapacity
  /** What its live sandboxes were given (CPUs, memory) and how many run, by backend. */
  usage: NodeUsage
  /** How many layers the node caches (their digests are in `layers`). */
  layersCached: number
}

export interface ClusterStats {
  at: number
  nodes: NodeFigures[]
  /** Nodes past `maxNodes`, not listed. */
  nodesOmitted: number
  /** Layer cache figures across nodes: distinct layers cached, copies of them, and the most copied. */
  layers: { distinct: number, copies: number, top: Array<{ digest: string, nodes: number }> }
  creations: CreationPoint[]
}

export interface ClusterStatsDeps {
  registry: () => Ref<RegistryMessage>
  directory: () => Ref<DirectoryMessage>
  creations?: CreationSeries
}

/**
 * Reads the cluster's figures for the page.
 * @param windowSec seconds of creations to answer (checked by the request parser: 1 to 600)
 */
export async function clusterStats (d: ClusterStatsDeps, windowSec = ClusterStatsDefaults.windowSec): Promise<ClusterStats> {
  const all = await d.registry().ask<NodeStatus[]>({ type: 'nodes' })
  const nodes = all.slice(0, ClusterStatsDefaults.maxNodes)
  const usage = await d.directory().ask<Record<string, NodeUsage>>({ type: 'usage', nodeIds: nodes.map((n) => n.id) })
  const holders = new Map<string, number>()
  for (const n of all) for (const l of n.layers) holders.set(l, (holders.get(l) ?? 0) + 1)
  const top = [...holders].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([digest, count]) => ({ digest, nodes: count }))
  return {
    at: Date.now(),
    nodes: nodes.map((n) => ({
      id: n.id, alive: n.alive, lastSeenMs: n.lastSeenMs, shard: n.shard, capacity: n.capacity,
      usage: usage[n.id] ?? { cpus: 0, memoryMiB: 0, sandboxes: {} },
      layersCached: n.layers.length
    })),
    nodesOmitted: all.length - nodes.length,
    layers: { distinct: holders.size, copies: [...holders.values()].reduce((a, b) => a + b, 0), top },
    creations: d.creations?.read(windowSec) ?? []
  }
}
