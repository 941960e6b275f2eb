/**
 * A node's own figures, as its heartbeats carry them to the control plane: a fixed set of
 * numbers (no free-form map a node could grow), counters since the node agent's process
 * started, and gauges as they are now. The control plane labels them `node="…"`.
 */
import type { ActorSystem } from '../../actors/index.js'
import type { CacheMetrics } from '../../images/blob/index.js'
import { BACKEND_LABELS, DEAD_LETTER_REASONS, MetricsDefaults, NODE_ACTOR_KINDS, nodeActorKind, type NodeActorKind } from './defaults.js'

type Backend = typeof BACKEND_LABELS[number]
type DeadLetterReason = typeof DEAD_LETTER_REASONS[number]

export interface NodeFigures {
  /** Commands started. */
  execs: number
  /** Commands ended: how many fell in each bucket of `MetricsDefaults.execBuckets` (one more: beyond the last), and their seconds summed. */
  execSeconds: { counts: number[], sum: number }
  /** Bytes of stdout and stderr commands wrote. */
  outputBytes: number
  /** Live sandboxes, by backend. */
  sandboxes: Record<Backend, number>
  /** The on-demand layer cache (zeros on a node without one). */
  layerCache: { hitBytes: number, missBytes: number, fetchedBytes: number, fetchFailures: number, cachedBytes: number, layers: number }
  /** Messages its actor system could not deliver, by reason. */
  deadLetters: Record<DeadLetterReason, number>
  /** Mailboxes by actor kind: live actors, messages queued in all, the deepest queue. */
  mailboxes: Record<NodeActorKind, { actors: number, queued: number, max: number }>
  /** Children its supervisors restarted (its control link after a lost connection, most often). */
  restarts: number
}

/** What a sandbox's commands tell the node's meter (exec-output.ts calls it). */
export interface ExecMeter {
  started (): void
  output (bytes: number): void
  ended (durationMs: number): void
}

/** The node's counters of commands, which its sandboxes share. */
export class NodeMeter implements ExecMeter {
  execs = 0
  outputBytes = 0
  restarts = 0
  readonly execCounts: number[] = new Array<number>(MetricsDefaults.execBuckets.length + 1).fill(0)
  execSum = 0

  started (): void { this.execs++ }
  output (bytes: number): void { this.outputBytes += bytes }
  ended (durationMs: number): void {
    const s = Math.max(0, durationMs) / 1000
    const i = MetricsDefaults.execBuckets.findIndex((le) => s <= le)
    this.execCounts[i === -1 ? MetricsDefaults.execBuckets.length : i]!++
    this.execSum += s
  }

  /** Counts the restarts `system`'s supervisors report. */
  watch (system: ActorSystem): void {
    system.on('supervisorRestart', () => { this.restarts++ })
  }

  /**
   * The figures a heartbeat carries.
   * @param sandboxes live sandboxes by backend (the node agent's count)
   * @param cache the layer cache's counters, when the node loads layers on demand
   */
  figures (system: ActorSystem, sandboxes: Partial<Record<string, number>>, cache: CacheMetrics | undefined): NodeFigures {
    const mailboxes = Object.fromEntries(NODE_ACTOR_KINDS.map((k) => [k, { actors: 0, queued: 0, max: 0 }])) as NodeFigures['mailboxes']
    for (const [kind, d] of system.mailboxDepths(nodeActorKind)) mailboxes[kind as NodeActorKind] = d
    const dead = system.stats().deadLetters
    return {
      execs: this.execs,
      execSeconds: { counts: [...this.execCounts], sum: this.execSum },
      outputBytes: this.outputBytes,
      sandboxes: Object.fromEntries(BACKEND_LABELS.map((b) => [b, sandboxes[b] ?? 0])) as NodeFigures['sandboxes'],
      layerCache: {
        hitBytes: cache?.bytesHit ?? 0,
        missBytes: cache === undefined ? 0 : Math.max(0, cache.bytesServed - cache.bytesHit),
        fetchedBytes: cache?.bytesFetched ?? 0,
        fetchFailures: cache?.fetchFailures ?? 0,
        cachedBytes: cache?.cachedBytes ?? 0,
        layers: cache?.layers ?? 0
      },
      deadLetters: Object.fromEntries(DEAD_LETTER_REASONS.map((r) => [r, dead[r] ?? 0])) as NodeFigures['deadLetters'],
      mailboxes,
      restarts: this.restarts
    }
  }
}
