/**
 * What placement knows of one node: its size, what it has promised, what it caches. A shard
 * keeps these up to date from the registry and from its own reservations, so choosing a node
 * needs no round trip.
 */
import type { BackendKind } from '../../backends/types.js'

export interface NodeCapacity {
  cpus: number
  memoryMiB: number
  /** How far requests may exceed the hardware: 4 means 4 CPUs of requests per real CPU. */
  cpuOvercommit: number
  memoryOvercommit: number
  /** Most sandboxes the node will run at once, by backend. */
  maxSandboxes: Partial<Record<BackendKind, number>>
  backends: BackendKind[]
}

export interface NodeView extends NodeCapacity {
  id: string
  /** CPUs and MiB promised to the sandboxes placed here. */
  allocatedCpus: number
  allocatedMemoryMiB: number
  /** Sandboxes placed here, by backend. */
  sandboxes: Partial<Record<BackendKind, number>>
  /** Layer digests the node caches (for locality). */
  layers: Set<string>
  alive: boolean
}

/** What one placement needs. */
export interface PlacementRequest {
  backend: BackendKind
  cpus: number
  memoryMiB: number
  layers: string[]
}

export function createNodeView (id: string, capacity: NodeCapacity): NodeView {
  return { id, ...capacity, allocatedCpus: 0, allocatedMemoryMiB: 0, sandboxes: {}, layers: new Set(), alive: true }
}

/** True when the node offers the backend and has room under its overcommit and caps. */
export function fits (node: NodeView, req: PlacementRequest): boolean {
  if (!node.alive || !node.backends.includes(req.backend)) return false
  const cap = node.maxSandboxes[req.backend] ?? Infinity
  if ((node.sandboxes[req.backend] ?? 0) + 1 > cap) return false
  return node.allocatedCpus + req.cpus <= node.cpus * node.cpuOvercommit &&
    node.allocatedMemoryMiB + req.memoryMiB <= node.memoryMiB * node.memoryOvercommit
}

/**
 * Higher is better: the share of CPU and memory left after placing (spreads load), plus a bonus
 * per requested layer the node already caches (cold starts cost what is fetched).
 */
export function score (node: NodeView, req: PlacementRequest): number {
  const cpuLeft = 1 - (node.allocatedCpus + req.cpus) / (node.cpus * node.cpuOvercommit)
  const memLeft = 1 - (node.allocatedMemoryMiB + req.memoryMiB) / (node.memoryMiB * node.memoryOvercommit)
  let cached = 0
  for (const layer of req.layers) if (node.layers.has(layer)) cached++
  const locality = req.layers.length === 0 ? 0 : cached / req.layers.length
  return Math.min(cpuLeft, memLeft) + locality
}

/** Records a placement on the node. */
export function reserve (node: NodeView, req: PlacementRequest): void {
  node.allocatedCpus += req.cpus
  node.allocatedMemoryMiB += req.memoryMiB
  node.sandboxes[req.backend] = (node.sandboxes[req.backend] ?? 0) + 1
}

/** Gives back what `reserve` took (the sandbox ended, or its creation failed). */
export function release (node: NodeView, req: PlacementRequest): void {
  node.allocatedCpus = Math.max(0, node.allocatedCpus - req.cpus)
  node.allocatedMemoryMiB = Math.max(0, node.allocatedMemoryMiB - req.memoryMiB)
  node.sandboxes[req.backend] = Math.max(0, (node.sandboxes[req.backend] ?? 0) - 1)
}
