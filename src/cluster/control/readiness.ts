/**
 * Whether the control plane can take work (`/readyz`): every placement shard answers and at
 * least one node is alive. A shard a supervisor is restarting, or a cluster whose nodes have
 * not joined yet, is not ready: a create now would only wait.
 */
import type { Ref } from '../../actors/index.js'
import type { ShardMessage } from '../placement/index.js'
import type { Readiness } from '../../web/index.js'
import type { NodeStatus, RegistryMessage } from './registry.js'

export const ReadinessDefaults = {
  /** Time each actor asked gets to answer. */
  askTimeoutMs: 1000
}

/** Asks the shards and the registry; the reason names what is missing. */
export async function controlPlaneReadiness (shards: () => Ref<ShardMessage>[], registry: () => Ref<RegistryMessage>): Promise<Readiness> {
  const timeoutMs = ReadinessDefaults.askTimeoutMs
  let refs: Ref<ShardMessage>[]
  try { refs = shards() } catch { return { ready: false, reason: 'a placement shard is not running' } }
  const answered = await Promise.all(refs.map(async (s) => await s.ask({ type: 'stats' }, { timeoutMs }).then(() => true, () => false)))
  const down = answered.filter((ok) => !ok).length
  if (down > 0) return { ready: false, reason: `${down} of ${refs.length} placement shards do not answer` }
  const nodes = await registry().ask<NodeStatus[]>({ type: 'nodes' }, { timeoutMs }).catch(() => undefined)
  if (nodes === undefined) return { ready: false, reason: 'the node registry does not answer' }
  if (!nodes.some((n) => n.alive)) return { ready: false, reason: nodes.length === 0 ? 'no node has joined' : 'no node is alive' }
  return { ready: true }
}
