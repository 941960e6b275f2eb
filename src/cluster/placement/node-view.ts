/**
 * What placement knows of one node: its size, what it has promised, what it caches. A shard
 * keeps these up to date from the registry and from its own reservations, so choosing a node
 * needs no round trip.
 */
import type { BackendKind } from '../../backends/types.js'

export interface NodeCapacity {
  cpus: number
  memoryMiB: number
  /** Room for sandboxes' writable layers (they live in memory); absent: not a limit. */
  diskMiB?: number
  /** How far requests may exceed the hardware: 4 means 4 CPUs of requests per real CPU. */
  cpuOvercommit: number
  memoryOvercommit: number
  /** Most sandboxes the node will run at once, by backend. */
  maxSandboxes: Partial<Record<BackendKind, number>>
  /**
   * Most memory the node promises to the sandboxes of a backend together, whatever
   * `memoryOvercommit` says: a microVM's guest RAM is taken for real (its page cache fills it,
   * and a restored VM keeps the pages it frees), so VMs get no more than the machine has.
   */
  maxMemoryMiB?: Partial<Record<BackendKind, number>>
  backends: BackendKind[]
  /**
   * The machines a memory snapshot restores on here (`tcg:max:qemu-7.2`: accelerator, CPU
   * model, QEMU release): a saved VM loads only under the one it was saved from.
   */
  machines?: string[]
}

export interface NodeView extends NodeCapacity {
  id: string
  /** CPUs and MiB promised to the sandboxes placed here. */
  allocatedCpus: number
  allocatedMemoryMiB: number
  /** The part of `allocatedMemoryMiB` placed for each backend. */
  memoryByBackend: Partial<Record<BackendKind, number>>
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
  /** The writable layer's size; only weighed against what a node has in all. */
  diskMiB?: number
  /** The sandbox's layer stack (digests), bottom first. */
  layers: string[]
  /**
   * A memory snapshot's restore: its state (a node that holds the file is preferred, as for
   * layers) and its saved machine (only a node listing it in `machines` can restore it).
   */
  memory?: { state: string, machine?: string }
}

/**
 * Whether any of a shard's live nodes offering the request's backend could ever hold it, empty
 * as they are: and if none could, the largest of each of their sizes (to say which limit is
 * beyond every node). `largest` is undefined when no live node offers the backend at all.
 */
export interface Room {
  ever: boolean
  largest?: { cpus: number, memoryMiB: number, diskMiB: number }
  /** Nodes the shard knows, live or lost, and whether any of them offers the backend at all. */
  nodes: number
  offered: boolean
  /** False when nodes offer the backend but none of them, live or lost, the request's machine. */
  machineOffered: boolean
}

export function createNodeView (id: string, capacity: NodeCapacity): NodeView {
  return { id, ...capacity, allocatedCpus: 0, allocatedMemoryMiB: 0, memoryByBackend: {}, sandboxes: {}, layers: new Set(), alive: true }
}

/** True when the node, empty, could hold the sandbox: overcommit shares a machine, it does not enlarge it. */
function holds (node: NodeCapacity, req: PlacementRequest): boolean {
  return node.cpus >= req.cpus && memoryFor(node, req.backend) >= req.memoryMiB && (node.diskMiB ?? Infinity) >= (req.diskMiB ?? 0)
}

/** The most memory the node gives one sandbox of `backend`: its size, or its cap for the backend. */
function memoryFor (node: NodeCapacity, backend: BackendKind): number {
  return Math.min(node.memoryMiB, node.maxMemoryMiB?.[backend] ?? Infinity)
}

/** True when the node offers the backend and, for a memory snapshot, restores its machine. */
function offers (node: NodeCapacity, req: PlacementRequest): boolean {
  const machine = req.memory?.machine
  return node.backends.includes(req.backend) && (machine === undefined || node.machines?.includes(machine) === true)
}

/** True when the node offers the backend, could hold the sandbox, and has room under its overcommit and caps. */
export function fits (node: NodeView, req: PlacementRequest): boolean {
  if (!node.alive || !offers(node, req) || !holds(node, req)) return false
  const cap = node.maxSandboxes[req.backend] ?? Infinity
  if ((node.sandboxes[req.backend] ?? 0) + 1 > cap) return false
  const memoryCap = node.maxMemoryMiB?.[req.backend]
  if (memoryCap !== undefined && (node.memoryByBackend[req.backend] ?? 0) + req.memoryMiB > memoryCap) return false
  return node.allocatedCpus + req.cpus <= node.cpus * node.cpuOvercommit &&
    node.allocatedMemoryMiB + req.memoryMiB <= node.memoryMiB * node.memoryOvercommit
}

/** The `Room` of `nodes` for `req`: sizes, not what is free, so the answer holds until nodes change. */
export function roomFor (nodes: readonly NodeView[], req: PlacementRequest): Room {
  let largest: Room['largest']
  const offered = nodes.some((n) => n.backends.includes(req.backend))
  const machineOffered = nodes.some((n) => offers(n, req))
  const room = { nodes: nodes.length, offered, machineOffered }
  for (const n of nodes) {
    if (!n.alive || !offers(n, req)) continue
    if (holds(n, req)) return { ever: true, ...room }
    largest = { cpus: Math.max(largest?.cpus ?? 0, n.cpus), memoryMiB: Math.max(largest?.memoryMiB ?? 0, memoryFor(n, req.backend)), diskMiB: Math.max(largest?.diskMiB ?? 0, n.diskMiB ?? Infinity) }
  }
  return largest === undefined ? { ever: false, ...room } : { ever: false, largest, ...room }
}

/**
 * True when nodes have joined and none of them, live or lost, offers the request's backend:
 * no amount of waiting brings one (a cluster with no node yet is still starting, and waits).
 */
export function offeredByNone (rooms: readonly Room[]): boolean {
  return rooms.some((r) => r.nodes > 0) && !rooms.some((r) => r.offered)
}

/**
 * True when nodes offer the backend and none of them, live or lost, restores the request's
 * saved machine (a memory snapshot made on a node of another kind, or on one that left).
 */
export function machineOfferedByNone (rooms: readonly Room[]): boolean {
  return rooms.some((r) => r.offered) && !rooms.some((r) => r.machineOffered)
}

/**
 * The limit no joined node could ever give `req` (`limits.memoryMiB`…; `limits` when each fits
 * some node but no node fits all), or undefined when one could, or when no node offers the
 * backend yet (one may join).
 */
export function beyondEveryNode (rooms: readonly Room[], req: PlacementRequest): string | undefined {
  if (rooms.some((r) => r.ever)) return undefined
  const sizes = rooms.flatMap((r) => r.largest !== undefined ? [r.largest] : [])
  if (sizes.length === 0) return undefined
  const most = (k: 'cpus' | 'memoryMiB' | 'diskMiB'): number => Math.max(...sizes.map((s) => s[k]))
  if (req.cpus > most('cpus')) return 'limits.cpus'
  if (req.memoryMiB > most('memoryMiB')) return 'limits.memoryMiB'
  if ((req.diskMiB ?? 0) > most('diskMiB')) return 'limits.diskMiB'
  return 'limits'
}

/**
 * Higher is better: the share of CPU and memory left after placing (spreads load), plus a bonus
 * per requested layer (and memory snapshot state) the node already caches (cold starts cost
 * what is fetched).
 */
export function score (node: NodeView, req: PlacementRequest): number {
  const cpuLeft = 1 - (node.allocatedCpus + req.cpus) / (node.cpus * node.cpuOvercommit)
  const memLeft = 1 - (node.allocatedMemoryMiB + req.memoryMiB) / (node.memoryMiB * node.memoryOvercommit)
  const files = req.memory !== undefined ? [...req.layers, req.memory.state] : req.layers
  let cached = 0
  for (const file of files) if (node.layers.has(file)) cached++
  const locality = files.length === 0 ? 0 : cached / files.length
  return Math.min(cpuLeft, memLeft) + locality
}

/** Records a placement on the node. */
export function reserve (node: NodeView, req: PlacementRequest): void {
  node.allocatedCpus += req.cpus
  node.allocatedMemoryMiB += req.memoryMiB
  node.memoryByBackend[req.backend] = (node.memoryByBackend[req.backend] ?? 0) + req.memoryMiB
  node.sandboxes[req.backend] = (node.sandboxes[req.backend] ?? 0) + 1
}

/** Gives back what `reserve` took (the sandbox ended, or its creation failed). */
export function release (node: NodeView, req: PlacementRequest): void {
  node.allocatedCpus = Math.max(0, node.allocatedCpus - req.cpus)
  node.allocatedMemoryMiB = Math.max(0, node.allocatedMemoryMiB - req.memoryMiB)
  node.memoryByBackend[req.backend] = Math.max(0, (node.memoryByBackend[req.backend] ?? 0) - req.memoryMiB)
  node.sandboxes[req.backend] = Math.max(0, (node.sandboxes[req.backend] ?? 0) - 1)
}

/**
 * Gives back (negative `cpus`) or takes again (positive) the CPU share of a sandbox placed here
 * without touching its memory or its slot: a paused sandbox runs nothing, so others may use its
 * CPU meanwhile. Taking it back is never refused — a resume is not a new placement — so the
 * node may be over its overcommit until something ends.
 */
export function shiftCpu (node: NodeView, cpus: number): void {
  node.allocatedCpus = Math.max(0, node.allocatedCpus + cpus)
}
