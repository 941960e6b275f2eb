/**
 * The control plane's placement side, built as production builds it, on the simulator's clock:
 *
 *   root (one_for_one)
 *   ├── registry   the real Registry: joins, heartbeats, a node silent too long is lost
 *   ├── directory  the simulator's own (below)
 *   └── placement (one_for_one) ── shard-0 … shard-k, the real PlacementShard
 *
 * The real supervisors restart what fails (the simulator can kill a shard to see it happen); a
 * restarted shard recovers its nodes with the same `createShardRecovery` production uses.
 *
 * Only the directory is the simulator's: the real one keeps a record per sandbox, which the
 * engine already keeps in flat arrays. It answers what the others ask of a directory: `node-lost`
 * (the registry declaring a node lost) and `usage` (what a restarted shard reserves again).
 */
import { Actor, type ActorSystem, type Ref } from '../src/actors/index.js'
import { createRegistry, createShardRecovery, shardForSandbox, shardOf, type DirectoryMessage, type RegistryMessage } from '../src/cluster/control/index.js'
import { createPlacementShard, type NodeUsage, type PlacementRequest, type ShardMessage } from '../src/cluster/placement/index.js'
import { createSupervisor, type ChildSpec } from '../src/supervisors/index.js'
import type { VirtualClock } from './clock.js'
import { createRng, deriveSeed } from './random.js'

export interface SimControlOptions {
  seed: number
  shards: number
  clock: VirtualClock
  heartbeatTimeoutMs: number
  registryCheckMs: number
  /** What runs on a node now (the engine's accounting). */
  usage: (nodeId: string) => NodeUsage
  /** The registry declared a node lost. */
  onNodeLost: (nodeId: string) => void
}

export interface SimControl {
  registry (): Ref<RegistryMessage> | undefined
  /** Shard `i`, or undefined while its supervisor restarts it. */
  shard (i: number): Ref<ShardMessage> | undefined
  /** Which shard owns a node (as the registry assigns it). */
  shardOfNode (nodeId: string): number
  /** Which shard places a sandbox (as a session chooses it). */
  shardForSandbox (req: PlacementRequest, id: string): number
  /** Kills shard `i` abnormally; its supervisor restarts it. */
  crashShard (i: number): void
}

/** The simulator's directory: see the header. Accepts only the messages registry and recovery send. */
class SimDirectory extends Actor<DirectoryMessage> {
  constructor (private readonly o: SimControlOptions) { super() }

  receive (m: DirectoryMessage): unknown {
    switch (m.type) {
      case 'node-lost':
        this.o.onNodeLost(m.nodeId)
        return undefined
      case 'usage': {
        const out: Record<string, NodeUsage> = {}
        for (const id of m.nodeIds) out[id] = this.o.usage(id)
        return out
      }
      default:
        return undefined // joins carry no sandboxes here: a simulated node comes back empty
    }
  }
}

export function startSimControl (system: ActorSystem, o: SimControlOptions): SimControl {
  const cache = new Map<string, Ref>()
  const ref = <M>(name: string): Ref<M> | undefined => {
    // Looked up by name like the control plane does, so a restarted actor is found again.
    let r = cache.get(name)
    if (r === undefined || !system.isAlive(r)) {
      r = system.lookup(`sim/${name}`)
      if (r === undefined) cache.delete(name)
      else cache.set(name, r)
    }
    return r as Ref<M> | undefined
  }
  const must = <M>(name: string) => (): Ref<M> => {
    const r = ref<M>(name)
    if (r === undefined) throw new Error(`${name} is not running`)
    return r
  }
  const shardName = (i: number): string => `shard-${i}`
  const shards = (): Ref<ShardMessage>[] => Array.from({ length: o.shards }, (_, i) => ref<ShardMessage>(shardName(i))).filter((r) => r !== undefined)
  const registry = must<RegistryMessage>('registry')
  const directory = must<DirectoryMessage>('directory')
  // Mailboxes sized for a warm start that places ~400,000 sandboxes at time 0.
  const big = { mailbox: { capacity: 2_000_000 } }

  const children: ChildSpec[] = [
    {
      id: 'registry',
      start: createRegistry({ shards, directory, heartbeatTimeoutMs: o.heartbeatTimeoutMs, checkEveryMs: o.registryCheckMs, now: () => o.clock.now() }),
      spawn: { name: 'registry', ...big }
    },
    { id: 'directory', start: () => new SimDirectory(o), spawn: { name: 'directory', ...big } },
    {
      id: 'placement',
      shutdown: 'infinity',
      start: createSupervisor({
        strategy: 'one_for_one',
        intensity: { maxRestarts: 10, periodMs: 60_000 },
        children: Array.from({ length: o.shards }, (_, i): ChildSpec => {
          // A restarted shard draws from a fresh stream of the same seed: runs stay reproducible.
          let generation = 0
          return {
            id: shardName(i),
            start: () => createPlacementShard({
              now: () => o.clock.now(),
              random: createRng(deriveSeed(o.seed, `shard-${i}-${generation++}`)),
              peers: shards,
              recover: createShardRecovery(i, registry, directory)
            })(),
            spawn: { name: shardName(i), ...big }
          }
        })
      }),
      spawn: { name: 'placement' }
    }
  ]
  system.spawn(createSupervisor({ strategy: 'one_for_one', intensity: { maxRestarts: 10, periodMs: 60_000 }, children }), { name: 'root' })

  return {
    registry: () => ref<RegistryMessage>('registry'),
    shard: (i) => ref<ShardMessage>(shardName(i)),
    shardOfNode: (nodeId) => shardOf(nodeId, o.shards),
    shardForSandbox: (req, id) => shardForSandbox(req, id, o.shards),
    crashShard (i) {
      const r = ref<ShardMessage>(shardName(i))
      if (r !== undefined) system.kill(r)
    }
  }
}
