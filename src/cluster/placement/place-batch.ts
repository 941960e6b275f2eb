/**
 * Placing a batch: each shard gets its share in one `place-now`; what did not fit at once asks
 * `place`, which tries the other shards and then waits for capacity until its deadline. The
 * control plane's sessions (a createMany) and the simulator (one millisecond's arrivals) both
 * place this way.
 */
import type { Ref } from '../../actors/index.js'
import type { PlacementRequest } from './node-view.js'
import type { ShardMessage } from './shard.js'

export interface BatchItem {
  shard: Ref<ShardMessage>
  req: PlacementRequest
  /** When the request gives up waiting for capacity (ms, the shard's clock). */
  deadline: number
}

/**
 * @param askTimeoutMs how long an ask may take, given its item's deadline (the shard answers by
 *        the deadline, so Infinity is safe where no timer is wanted)
 * @returns one promise per item, in order: the chosen node, or the shard's error (NO_CAPACITY…)
 */
export function placeBatch (items: readonly BatchItem[], askTimeoutMs: (deadline: number) => number): Array<Promise<{ nodeId: string }>> {
  const groups = new Map<Ref<ShardMessage>, number[]>()
  items.forEach((item, i) => {
    let group = groups.get(item.shard)
    if (group === undefined) { group = []; groups.set(item.shard, group) }
    group.push(i)
  })
  const out = new Array<Promise<{ nodeId: string }>>(items.length)
  for (const [shard, indices] of groups) {
    const first = items[indices[0]!]!
    const now = shard.ask<Array<string | null>>({ type: 'place-now', reqs: indices.map((i) => items[i]!.req) }, { timeoutMs: askTimeoutMs(first.deadline) })
      .catch(() => indices.map(() => null)) // a refused batch: each item asks on its own below
    indices.forEach((i, k) => {
      const item = items[i]!
      out[i] = now.then((ids) => {
        const nodeId = ids[k]
        return nodeId !== null && nodeId !== undefined
          ? { nodeId }
          : shard.ask<{ nodeId: string }>({ type: 'place', req: item.req, deadline: item.deadline }, { timeoutMs: askTimeoutMs(item.deadline) })
      })
    })
  }
  return out
}
