/**
 * Choosing a node: sample `k` nodes at random and take the best-scoring one that fits (the
 * "power of k choices": near-best balance for the cost of k looks, not n). When no sampled node
 * fits, one full pass finds any node that does, so a nearly full cluster still places.
 */
import { fits, score, type NodeView, type PlacementRequest } from './node-view.js'

export function chooseNode (nodes: readonly NodeView[], req: PlacementRequest, k: number, random: () => number): NodeView | undefined {
  const n = nodes.length
  if (n === 0) return undefined
  let best: NodeView | undefined
  let bestScore = -Infinity
  if (n > k) {
    for (let i = 0; i < k; i++) {
      const node = nodes[Math.floor(random() * n)]!
      if (!fits(node, req)) continue
      const s = score(node, req)
      if (s > bestScore) { best = node; bestScore = s }
    }
    if (best !== undefined) return best
  }
  // Few nodes, or no sampled node fits: look at every node.
  const start = Math.floor(random() * n)
  for (let i = 0; i < n; i++) {
    const node = nodes[(start + i) % n]!
    if (!fits(node, req)) continue
    const s = score(node, req)
    if (s > bestScore) { best = node; bestScore = s }
  }
  return best
}
