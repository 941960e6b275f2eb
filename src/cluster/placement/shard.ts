/**
 * PlacementShard: owns a partition of the nodes' capacity view and answers "where does this
 * sandbox go?". It only decides and reserves; the caller creates the sandbox on the chosen node
 * and sends `release` when the sandbox ends or its creation fails.
 *
 * A request this shard cannot fit is offered to the other shards (no waiting there); if none
 * fits either, it waits here until capacity frees up or its deadline passes
 * (`WARREN_ERR_NO_CAPACITY`). A request larger than every joined node is refused at once, with
 * the same code: no amount of waiting makes room for it; one of a backend no joined node offers
 * is `WARREN_ERR_UNSUPPORTED` (field `backend`), at once, and so is a memory snapshot's whose
 * saved machine no joined node restores (field `snapshot`). The waiting list is bounded
 * (`WARREN_ERR_OVERLOADED` beyond it).
 *
 * The simulator drives this same class on a virtual clock: time comes from `now`, randomness
 * from `random`, never from globals.
 */
import { Actor, type Ref, type ReplyTo } from '../../actors/index.js'
import type { BackendKind } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import { chooseNode } from './choose.js'
import { beyondEveryNode, createNodeView, machineOfferedByNone, offeredByNone, release, reserve, roomFor, shiftCpu, type NodeCapacity, type NodeView, type PlacementRequest, type Room } from './node-view.js'

export const PlacementDefaults = {
  /** Nodes sampled per decision. */
  sampleK: 3,
  /** Requests that may wait for capacity at once, per shard. */
  maxWaiting: 10_000,
  /** How often waiting requests are checked against their deadlines. */
  sweepMs: 50
}

export type ShardMessage =
  | { type: 'node-up', id: string, capacity: NodeCapacity, layers?: string[] }
  | { type: 'node-layers', id: string, layers: string[] }
  | { type: 'node-lost', id: string }
  | { type: 'place', req: PlacementRequest, deadline: number, local?: boolean }
  | { type: 'place-now', reqs: PlacementRequest[] }
  | { type: 'release', nodeId: string, req: PlacementRequest }
  | { type: 'reserve', nodeId: string, req: PlacementRequest }
  /** A paused sandbox's CPU given back (`cpus` < 0) or taken again at its resume (> 0); see `shiftCpu`. */
  | { type: 'shift-cpu', nodeId: string, cpus: number }
  | { type: 'sweep' }
  | { type: 'stats' }
  | { type: 'recovered', nodes: RecoveredNode[] }

/** A node as a restarted shard finds it again: from the registry, with what its sandboxes hold. */
export interface RecoveredNode {
  id: string
  capacity: NodeCapacity
  layers: string[]
  /** What the sandboxes running there were given (summed). */
  usage: NodeUsage
}

export interface NodeUsage { cpus: number, memoryMiB: number, memoryByBackend?: Partial<Record<BackendKind, number>>, sandboxes: Partial<Record<BackendKind, number>> }

export interface ShardStats {
  nodes: number
  alive: number
  waiting: number
  placed: number
  refused: number
  /** What is reserved on this shard's nodes now: CPUs and sandboxes. */
  allocatedCpus: number
  sandboxes: number
}

export interface PlacementShardOptions {
  /** The other shards, to offer requests this one cannot fit. */
  peers?: () => Ref<ShardMessage>[]
  sampleK?: number
  maxWaiting?: number
  sweepMs?: number
  now?: () => number
  random?: () => number
  /**
   * Where a (re)started shard finds the nodes it owns and what runs on them. Without it a shard
   * restarted by its supervisor would see no node until each one rejoined.
   */
  recover?: () => Promise<RecoveredNode[]>
}

interface Waiting { req: PlacementRequest, deadline: number, reply: ReplyTo }

export class PlacementShard extends Actor<ShardMessage> {
  private readonly nodes = new Map<string, NodeView>()
  private list: NodeView[] = []
  private readonly waiting: Waiting[] = []
  private placed = 0
  private refused = 0
  private readonly o: Required<Omit<PlacementShardOptions, 'peers' | 'recover'>> & Pick<PlacementShardOptions, 'peers' | 'recover'>

  constructor (options: PlacementShardOptions = {}) {
    super()
    this.o = {
      sampleK: options.sampleK ?? PlacementDefaults.sampleK,
      maxWaiting: options.maxWaiting ?? PlacementDefaults.maxWaiting,
      sweepMs: options.sweepMs ?? PlacementDefaults.sweepMs,
      now: options.now ?? Date.now,
      random: options.random ?? Math.random,
      peers: options.peers,
      recover: options.recover
    }
  }

  preStart (): void {
    const recover = this.o.recover
    if (recover === undefined) return
    // Asked, not awaited: the shard answers from the first message; what it recovers arrives as a message.
    recover().then((nodes) => this.self.tell({ type: 'recovered', nodes }), () => {})
  }

  receive (m: ShardMessage): unknown {
    switch (m.type) {
      case 'node-up': {
        const prev = this.nodes.get(m.id)
        const view = createNodeView(m.id, m.capacity)
        if (prev !== undefined) {
          // A rejoining node keeps what was reserved on it; its sandboxes are still counted.
          view.allocatedCpus = prev.allocatedCpus
          view.allocatedMemoryMiB = prev.allocatedMemoryMiB
          view.memoryByBackend = prev.memoryByBackend
          view.sandboxes = prev.sandboxes
        }
        for (const l of m.layers ?? []) view.layers.add(l)
        this.nodes.set(m.id, view)
        this.list = [...this.nodes.values()]
        this.drainWaiting()
        return undefined
      }
      case 'node-layers': {
        const node = this.nodes.get(m.id)
        if (node !== undefined) node.layers = new Set(m.layers)
        return undefined
      }
      case 'node-lost': {
        const node = this.nodes.get(m.id)
        if (node !== undefined) {
          node.alive = false
          // Its sandboxes are gone with it; nothing on it is reserved any more.
          node.allocatedCpus = 0
          node.allocatedMemoryMiB = 0
          node.memoryByBackend = {}
          node.sandboxes = {}
        }
        return undefined
      }
      case 'place':
        return this.place(m.req, m.deadline, m.local === true)
      case 'place-now':
        // A batch (a createMany, or the simulator's arrivals of one instant) placed in one
        // message; what does not fit now is null, and the caller asks `place` for it.
        return m.reqs.map((req) => this.tryPlace(req)?.id ?? null)
      case 'recovered':
        for (const r of m.nodes) {
          if (this.nodes.has(r.id)) continue // a node-up since the restart is newer
          const view = createNodeView(r.id, r.capacity)
          view.allocatedCpus = r.usage.cpus
          view.allocatedMemoryMiB = r.usage.memoryMiB
          view.memoryByBackend = { ...r.usage.memoryByBackend }
          view.sandboxes = { ...r.usage.sandboxes }
          for (const l of r.layers) view.layers.add(l)
          this.nodes.set(r.id, view)
        }
        this.list = [...this.nodes.values()]
        this.drainWaiting()
        return undefined
      case 'release': {
        const node = this.nodes.get(m.nodeId)
        if (node !== undefined) { release(node, m.req); this.drainWaiting() }
        return undefined
      }
      case 'reserve': {
        // A sandbox placed before (adopted after a restart) takes its share again.
        const node = this.nodes.get(m.nodeId)
        if (node !== undefined) reserve(node, m.req)
        return undefined
      }
      case 'shift-cpu': {
        const node = this.nodes.get(m.nodeId)
        if (node !== undefined) { shiftCpu(node, m.cpus); if (m.cpus < 0) this.drainWaiting() }
        return undefined
      }
      case 'sweep':
        this.sweep()
        return undefined
      case 'stats':
        return {
          nodes: this.nodes.size,
          alive: this.list.filter((n) => n.alive).length,
          waiting: this.waiting.length,
          placed: this.placed,
          refused: this.refused,
          allocatedCpus: this.list.reduce((sum, n) => sum + n.allocatedCpus, 0),
          sandboxes: this.list.reduce((sum, n) => sum + Object.values(n.sandboxes).reduce((a, b) => a + (b ?? 0), 0), 0)
        } satisfies ShardStats
    }
  }

  /**
   * Places now if it can; else asks the peers; else waits. Replies `{ nodeId }`; asked by a peer
   * (`localOnly`), `{ nodeId: undefined, room }` when it cannot place.
   */
  private place (req: PlacementRequest, deadline: number, localOnly: boolean): unknown {
    const node = this.tryPlace(req)
    if (node !== undefined) return { nodeId: node.id }
    if (localOnly) return { nodeId: undefined, room: roomFor(this.list, req) }
    const reply = this.ctx.defer()
    if ((this.o.peers?.().length ?? 0) <= 1) { this.waitOrRefuse(req, deadline, reply, []); return undefined }
    void this.askPeers(req).then(({ nodeId, rooms }) => {
      if (nodeId !== undefined) reply.resolve({ nodeId })
      else this.waitOrRefuse(req, deadline, reply, rooms)
    }, () => this.wait(req, deadline, reply))
    return undefined
  }

  private tryPlace (req: PlacementRequest): NodeView | undefined {
    const node = chooseNode(this.list, req, this.o.sampleK, this.o.random)
    if (node === undefined) return undefined
    reserve(node, req)
    this.placed++
    return node
  }

  private async askPeers (req: PlacementRequest): Promise<{ nodeId: string | undefined, rooms: Room[] }> {
    const rooms: Room[] = []
    for (const peer of this.o.peers?.() ?? []) {
      if (peer === this.self) continue
      const r = await peer.ask<{ nodeId: string | undefined, room?: Room }>({ type: 'place', req, deadline: 0, local: true })
      if (r.nodeId !== undefined) return { nodeId: r.nodeId, rooms }
      if (r.room !== undefined) rooms.push(r.room)
    }
    return { nodeId: undefined, rooms }
  }

  /** Refuses at once what no joined node (here or at the peers, `rooms`) could ever hold; else waits. */
  private waitOrRefuse (req: PlacementRequest, deadline: number, reply: ReplyTo, rooms: Room[]): void {
    const all = [roomFor(this.list, req), ...rooms]
    if (offeredByNone(all)) {
      this.refused++
      reply.reject(createError(ErrorCodes.UNSUPPORTED, `no node of this cluster offers the ${req.backend} backend`, { field: 'backend', backend: req.backend }))
      return
    }
    if (machineOfferedByNone(all)) {
      this.refused++
      const machine = req.memory?.machine
      reply.reject(createError(ErrorCodes.UNSUPPORTED, `no node of this cluster restores a memory snapshot saved on ${String(machine)}`, { field: 'snapshot', machine }))
      return
    }
    const field = beyondEveryNode(all, req)
    if (field === undefined) { this.wait(req, deadline, reply); return }
    this.refused++
    reply.reject(createError(ErrorCodes.NO_CAPACITY,
      `no node could ever hold this ${req.backend} sandbox (${req.cpus} CPU, ${req.memoryMiB} MiB, ${req.diskMiB ?? 0} MiB disk): ${field} is beyond every joined node`,
      { backend: req.backend, field }))
  }

  private wait (req: PlacementRequest, deadline: number, reply: ReplyTo): void {
    // Capacity may have freed while the peers were asked.
    const node = this.tryPlace(req)
    if (node !== undefined) { reply.resolve({ nodeId: node.id }); return }
    if (this.o.now() >= deadline) { this.refuse(reply, req); return }
    if (this.waiting.length >= this.o.maxWaiting) {
      this.refused++
      reply.reject(createError(ErrorCodes.OVERLOADED, 'too many requests are waiting for capacity', { retryAfterMs: this.o.sweepMs }))
      return
    }
    this.waiting.push({ req, deadline, reply })
    if (this.waiting.length === 1) this.ctx.setTimer('sweep', this.o.sweepMs, { type: 'sweep' }, { repeat: true })
  }

  private drainWaiting (): void {
    while (this.waiting.length > 0) {
      const first = this.waiting[0]!
      const node = this.tryPlace(first.req)
      if (node === undefined) break // first come, first served: a small request does not overtake
      this.waiting.shift()
      first.reply.resolve({ nodeId: node.id })
    }
    if (this.waiting.length === 0) this.ctx.cancelTimer('sweep')
  }

  private sweep (): void {
    this.drainWaiting()
    const now = this.o.now()
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!
      if (now >= w.deadline) { this.waiting.splice(i, 1); this.refuse(w.reply, w.req) }
    }
    if (this.waiting.length === 0) this.ctx.cancelTimer('sweep')
  }

  private refuse (reply: ReplyTo, req: PlacementRequest): void {
    this.refused++
    reply.reject(createError(ErrorCodes.NO_CAPACITY, `no node has room for a ${req.backend} sandbox (${req.cpus} CPU, ${req.memoryMiB} MiB)`, { backend: req.backend }))
  }

  postStop (): void {
    for (const w of this.waiting.splice(0)) w.reply.reject(createError(ErrorCodes.ACTOR_STOPPED, 'placement is shutting down'))
  }
}

/** A factory for spawning a shard. */
export function createPlacementShard (options: PlacementShardOptions = {}): () => PlacementShard {
  return () => new PlacementShard(options)
}
