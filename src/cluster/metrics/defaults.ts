/**
 * The bounds and buckets of warren's metrics, in one place. Every label's values come from a
 * fixed set (backends, states, error codes, request types, actor kinds) or are bounded here, so
 * a scrape's size does not grow with what clients ask for.
 */

export const MetricsDefaults = {
  /** Bucket bounds (seconds) of sandbox creation: a warm claim is milliseconds, a cold VM boot seconds. */
  createBuckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  /** Bucket bounds (seconds) of command durations; nodes send counts for exactly these (and one beyond). */
  execBuckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  /** Actor kinds (class names) the control plane reports mailboxes of; the rest are summed as `other`. */
  maxActorKinds: 32,
  /** Nodes whose figures are kept; a further joiner's are dropped (counted as refused) until one goes. */
  maxNodes: 10_000,
  /** The largest number a node may report (2^53: beyond it counts are not exact anyway). */
  maxFigure: Number.MAX_SAFE_INTEGER
}

/** The backends every per-backend figure is reported for (a fixed set: a node cannot add one). */
export const BACKEND_LABELS = ['function', 'container', 'microvm', 'fullvm'] as const

/** The kinds a node's actors are summed by in its figures. */
export const NODE_ACTOR_KINDS = ['agent', 'sandbox', 'control', 'supervisor', 'other'] as const
export type NodeActorKind = typeof NODE_ACTOR_KINDS[number]

/** Dead-letter reasons, as the actor system counts them. */
export const DEAD_LETTER_REASONS = ['overloaded', 'dropped', 'stopped', 'no-such-actor'] as const

/** The kind a node actor's class is summed under. */
export function nodeActorKind (className: string): NodeActorKind {
  switch (className) {
    case 'NodeAgent': return 'agent'
    case 'Sandbox': return 'sandbox'
    case 'ControlLink': return 'control'
    case 'Supervisor': case 'DynamicSupervisor': return 'supervisor'
    default: return 'other'
  }
}
