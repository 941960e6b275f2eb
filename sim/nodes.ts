/**
 * Simulated nodes: the hardware placement sees (cores, memory, overcommit, caps) and a backend
 * whose creations take a service time instead of starting anything. Creation service times
 * default to what the real backends measured on this machine kind (`npm run bench -- container`:
 * ~7 ms; namespace creation serialises, so one creation at a time per node by default).
 */
import type { BackendKind } from '../src/backends/types.js'
import type { NodeCapacity, NodeUsage, PlacementRequest } from '../src/cluster/placement/index.js'
import { lognormal, type Rng } from './random.js'

/** A simulated node is what placement sees of a real one (NodeCapacity), plus how it behaves. */
export interface NodesConfig extends NodeCapacity {
  count: number
  /** Median creation service time per backend (ms); each creation varies lognormally by `serviceSigma`. */
  serviceMs: Partial<Record<BackendKind, number>>
  serviceSigma: number
  /** Creations a node runs at once. */
  createSlots: number
  /** Crashes per node per day (Poisson); a crashed node is back after `repairMs`. */
  crashesPerNodePerDay: number
  repairMs: number
  /** The node's bandwidth to the blob store, bytes/s; cold-start fetches share it one after another. */
  blobBytesPerS: number
}

export const DSecNodes: NodesConfig = {
  count: 160,
  cpus: 187,
  memoryMiB: 1.5 * 1024 * 1024,
  cpuOvercommit: 16,
  memoryOvercommit: 1.5,
  maxSandboxes: { container: 3200, microvm: 800, function: 3200, fullvm: 100 },
  backends: ['container', 'microvm', 'function'],
  serviceMs: { container: 7, function: 1, microvm: 2000, fullvm: 30_000 },
  serviceSigma: 0.25,
  createSlots: 1,
  crashesPerNodePerDay: 0.01,
  blobBytesPerS: 1.25e9, // 10 Gbit/s
  repairMs: 10 * 60_000
}

export class SimNode {
  alive = true
  /** Requested CPUs, used CPUs, requested MiB and sandboxes, of what runs here. */
  reqCpus = 0
  useCpus = 0
  memoryMiB = 0
  sandboxes = 0
  readonly byBackend: Partial<Record<BackendKind, number>> = {}
  /** Layers pulled to this node (its cache; unbounded in this model). */
  readonly layers = new Set<string>()
  layerHits = 0
  layerMisses = 0
  private readonly slots: Float64Array

  constructor (readonly id: string, readonly index: number, readonly config: NodesConfig) {
    this.slots = new Float64Array(Math.max(1, config.createSlots))
  }

  capacity (): NodeCapacity {
    const c = this.config
    return {
      cpus: c.cpus,
      memoryMiB: c.memoryMiB,
      cpuOvercommit: c.cpuOvercommit,
      memoryOvercommit: c.memoryOvercommit,
      maxSandboxes: { ...c.maxSandboxes },
      backends: [...c.backends]
    }
  }

  /**
   * Queues one creation at `now`; returns when it finishes. Creations take the earliest free
   * slot, so a burst onto one node waits behind the ones before it.
   */
  create (now: number, backend: BackendKind, rng: Rng): number {
    let best = 0
    for (let i = 1; i < this.slots.length; i++) if (this.slots[i]! < this.slots[best]!) best = i
    const start = Math.max(now, this.slots[best]!)
    const service = lognormal(rng, this.config.serviceMs[backend] ?? 10, this.config.serviceSigma)
    const done = start + service
    this.slots[best] = done
    return done
  }

  /** A sandbox starts (`sign` 1) or ends (-1) here. */
  account (req: PlacementRequest, cpuUse: number, sign: 1 | -1): void {
    this.reqCpus += sign * req.cpus
    this.useCpus += sign * cpuUse
    this.memoryMiB += sign * req.memoryMiB
    this.sandboxes += sign
    this.byBackend[req.backend] = (this.byBackend[req.backend] ?? 0) + sign
  }

  /** True when what runs here exceeds what placement may promise (a placement bug if ever true). */
  overPromised (): boolean {
    const c = this.config
    const eps = 1e-6
    return this.reqCpus > c.cpus * c.cpuOvercommit + eps || this.memoryMiB > c.memoryMiB * c.memoryOvercommit + eps ||
      Object.entries(this.byBackend).some(([b, n]) => n > (c.maxSandboxes[b as BackendKind] ?? Infinity))
  }

  /** What runs here, as a restarted placement shard reserves it again. */
  usage (): NodeUsage {
    return { cpus: this.reqCpus, memoryMiB: this.memoryMiB, sandboxes: { ...this.byBackend } }
  }

  /** Records which layers a creation needed; returns how many were already cached. */
  pull (layers: readonly string[]): number {
    let hits = 0
    for (const l of layers) {
      if (this.layers.has(l)) hits++
      else this.layers.add(l)
    }
    this.layerHits += hits
    this.layerMisses += layers.length - hits
    return hits
  }

  crash (): void {
    this.alive = false
    this.reqCpus = 0
    this.useCpus = 0
    this.memoryMiB = 0
    this.sandboxes = 0
    for (const b of Object.keys(this.byBackend)) delete this.byBackend[b as BackendKind]
    this.slots.fill(0)
    this.layers.clear()
  }
}
