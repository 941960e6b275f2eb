/**
 * Registry: node membership. A node joins (its link already proved the join token), reports
 * its capacity, and heartbeats. A node silent for `heartbeatTimeoutMs` is declared lost:
 * placement stops choosing it and the directory marks its sandboxes `lost`, which tells their
 * owners. A lost node that comes back simply joins again.
 */
import { Actor, type Ref } from '../../actors/index.js'
import type { NodeCapacity, NodeUsage, PlacementRequest, RecoveredNode, ShardMessage } from '../placement/index.js'
import type { SandboxSummary } from '../node/index.js'
import type { DirectoryMessage } from './directory.js'
import { silentLogger, type Logger } from '../../log/index.js'
import { parseNodeFigures, type NodeFigures, type NodesFigures } from '../metrics/index.js'

export const RegistryDefaults = {
  heartbeatTimeoutMs: 3000,
  checkEveryMs: 250
}

export type RegistryMessage =
  | { type: 'join', nodeId: string, capacity: NodeCapacity, layers?: string[], sandboxes?: SandboxSummary[] }
  /** `figures`: the node's own metrics (NodeFigures), checked here; malformed ones are refused, the beat still counts. */
  | { type: 'heartbeat', nodeId: string, layers?: string[], figures?: unknown }
  | { type: 'leave', nodeId: string }
  | { type: 'check' }
  /** Every member, or only those a shard owns. */
  | { type: 'nodes', shard?: number }
  /** Live nodes with their capacity and last heartbeat figures (for /metrics). */
  | { type: 'figures' }

export interface NodeStatus { id: string, alive: boolean, lastSeenMs: number, shard: number, capacity: NodeCapacity, layers: string[] }

export interface RegistryOptions {
  shards: () => Ref<ShardMessage>[]
  directory: () => Ref<DirectoryMessage>
  heartbeatTimeoutMs?: number
  checkEveryMs?: number
  now?: () => number
  /** Where joins, losses and rejoins are logged (none: silent). */
  log?: Logger
}

interface Member { id: string, capacity: NodeCapacity, lastSeen: number, alive: boolean, shard: number, layers: string[], figures?: NodeFigures }

/** Which shard owns a node: a stable hash of its id. */
export function shardOf (nodeId: string, shards: number): number {
  let h = 2166136261
  for (let i = 0; i < nodeId.length; i++) h = Math.imul(h ^ nodeId.charCodeAt(i), 16777619)
  return (h >>> 0) % shards
}

/**
 * Which shard places a sandbox. Sandboxes of one image go to one shard, whose nodes then hold
 * that image's layers (the locality a shard can see is within its own partition); without an
 * image, spread by id.
 */
export function shardForSandbox (req: Pick<PlacementRequest, 'layers'>, id: string, shards: number): number {
  return shardOf(req.layers[0] ?? id, shards)
}

export class Registry extends Actor<RegistryMessage> {
  private readonly members = new Map<string, Member>()
  private readonly timeoutMs: number
  private readonly now: () => number
  private readonly log: Logger
  /** Heartbeats whose figures were refused. */
  private figuresRefused = 0

  constructor (private readonly o: RegistryOptions) {
    super()
    this.timeoutMs = o.heartbeatTimeoutMs ?? RegistryDefaults.heartbeatTimeoutMs
    this.now = o.now ?? Date.now
    this.log = o.log ?? silentLogger()
  }

  preStart (): void {
    this.ctx.setTimer('check', this.o.checkEveryMs ?? RegistryDefaults.checkEveryMs, { type: 'check' }, { repeat: true })
  }

  receive (m: RegistryMessage): unknown {
    switch (m.type) {
      case 'join': {
        const shards = this.o.shards()
        const shard = shardOf(m.nodeId, shards.length)
        const before = this.members.get(m.nodeId)
        const sandboxes = Array.isArray(m.sandboxes) ? m.sandboxes.length : 0
        if (before === undefined) this.log.info({ node: m.nodeId, shard, sandboxes }, 'node joined')
        else if (!before.alive) this.log.info({ node: m.nodeId, shard, sandboxes, awayMs: this.now() - before.lastSeen }, 'node rejoined')
        else this.log.info({ node: m.nodeId, shard, sandboxes }, 'node joined again (a restarted agent)')
        this.members.set(m.nodeId, { id: m.nodeId, capacity: m.capacity, lastSeen: this.now(), alive: true, shard, layers: m.layers ?? [] })
        shards[shard]!.tell({ type: 'node-up', id: m.nodeId, capacity: m.capacity, ...(m.layers !== undefined ? { layers: m.layers } : {}) })
        this.o.directory().tell({ type: 'node-sandboxes', nodeId: m.nodeId, sandboxes: Array.isArray(m.sandboxes) ? m.sandboxes : [] })
        return { shard, heartbeatTimeoutMs: this.timeoutMs }
      }
      case 'heartbeat': {
        const member = this.members.get(m.nodeId)
        if (member === undefined || !member.alive) return { rejoin: true } // lost meanwhile: it must join again
        member.lastSeen = this.now()
        if (Array.isArray(m.layers)) {
          member.layers = m.layers
          this.o.shards()[member.shard]!.tell({ type: 'node-layers', id: m.nodeId, layers: m.layers })
        }
        if (m.figures !== undefined) this.keepFigures(member, m.figures)
        return { rejoin: false }
      }
      case 'leave': {
        // A node shutting down says so: placement stops choosing it now, not after the timeout.
        const member = this.members.get(m.nodeId)
        if (member !== undefined && member.alive) this.lose(member, 'it left (shutting down)')
        return true
      }
      case 'check': {
        const now = this.now()
        for (const member of this.members.values()) {
          if (member.alive && now - member.lastSeen > this.timeoutMs) this.lose(member, `no heartbeat for ${now - member.lastSeen} ms (timeout ${this.timeoutMs} ms)`)
        }
        return undefined
      }
      case 'figures': {
        const live = [...this.members.values()].filter((n) => n.alive)
        return {
          nodes: live.map((n) => ({ id: n.id, capacity: n.capacity, ...(n.figures !== undefined ? { figures: n.figures } : {}) })),
          lost: this.members.size - live.length,
          refused: this.figuresRefused
        } satisfies NodesFigures
      }
      case 'nodes':
        return [...this.members.values()].filter((n) => m.shard === undefined || n.shard === m.shard).map((n): NodeStatus => ({
          id: n.id, alive: n.alive, lastSeenMs: this.now() - n.lastSeen, shard: n.shard, capacity: n.capacity, layers: n.layers
        }))
    }
  }

  /** Keeps a heartbeat's figures, or refuses them (naming the field) and drops the node's older ones: a node that sends garbage shows none. */
  private keepFigures (member: Member, figures: unknown): void {
    try {
      member.figures = parseNodeFigures(figures)
    } catch (err) {
      delete member.figures
      this.figuresRefused++
      throw err
    }
  }

  private lose (member: Member, cause: string): void {
    member.alive = false
    // A node that said it leaves is news; one that fell silent is trouble.
    this.log[cause.startsWith('it left') ? 'info' : 'warn']({ node: member.id, shard: member.shard, cause }, 'node lost')
    // A lost node's series go from /metrics at once (Prometheus marks them stale); a rejoin brings new ones.
    delete member.figures
    this.o.shards()[member.shard]!.tell({ type: 'node-lost', id: member.id })
    this.o.directory().tell({ type: 'node-lost', nodeId: member.id })
  }
}

export function createRegistry (options: RegistryOptions): () => Registry {
  return () => new Registry(options)
}

/**
 * How shard `index` finds its nodes again after a restart: the registry's live members it owns,
 * with what the directory's live sandboxes on them hold.
 */
export function createShardRecovery (index: number, registry: () => Ref<RegistryMessage>, directory: () => Ref<DirectoryMessage>): () => Promise<RecoveredNode[]> {
  return async () => {
    const members = (await registry().ask<NodeStatus[]>({ type: 'nodes', shard: index })).filter((n) => n.alive)
    const usage = await directory().ask<Record<string, NodeUsage>>({ type: 'usage', nodeIds: members.map((n) => n.id) })
    return members.map((n) => ({ id: n.id, capacity: n.capacity, layers: n.layers, usage: usage[n.id] ?? { cpus: 0, memoryMiB: 0, sandboxes: {} } }))
  }
}
