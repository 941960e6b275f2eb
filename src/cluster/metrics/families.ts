/**
 * Metric families whose values are read, at scrape time, from figures someone else keeps (a
 * node's heartbeat, the directory's counts): registered in a prom-client Registry beside its
 * own Counters and Histograms, and printed by it in the same text format. A series that is not
 * in the figures any more (a lost node's) is simply not printed: Prometheus marks it stale.
 */
import type { Metric, Registry } from 'prom-client'

export type Labels = Record<string, string>
export interface Sample { labels: Labels, value: number }

type FamilyType = 'counter' | 'gauge'

/** A counter or gauge family whose samples `read` gives at each scrape. */
export function registerFamily (registry: Registry, name: string, help: string, type: FamilyType, read: () => Sample[]): void {
  register(registry, name, help, type, () => read())
}

/** One histogram's buckets as counts per bucket (the last: beyond every bound), with their sum. */
export interface HistogramSample { labels: Labels, counts: number[], sum: number }

/** A histogram family whose per-bucket counts `read` gives at each scrape (cumulated here, as Prometheus wants them). */
export function registerHistogramFamily (registry: Registry, name: string, help: string, bounds: readonly number[], read: () => HistogramSample[]): void {
  register(registry, name, help, 'histogram', () => read().flatMap((h) => {
    let total = 0
    const out: Array<Sample & { metricName: string }> = []
    for (let i = 0; i <= bounds.length; i++) {
      total += h.counts[i] ?? 0
      out.push({ metricName: `${name}_bucket`, labels: { ...h.labels, le: i < bounds.length ? String(bounds[i]) : '+Inf' }, value: total })
    }
    out.push({ metricName: `${name}_sum`, labels: h.labels, value: h.sum })
    out.push({ metricName: `${name}_count`, labels: h.labels, value: total })
    return out
  }))
}

function register (registry: Registry, name: string, help: string, type: FamilyType | 'histogram', values: () => Array<Sample & { metricName?: string }>): void {
  // The shape prom-client's Registry prints: name, help, type and `get()`'s values.
  const family = {
    name, help, type, aggregator: 'sum',
    get: () => ({ name, help, type, aggregator: 'sum', values: values() }),
    reset: () => {}
  }
  registry.registerMetric(family as unknown as Metric)
}

/**
 * Keeps a label's values to the first `max` distinct ones seen; any other is `other`. For labels
 * whose values come from the code (actor class names), where a bug must not grow a scrape.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>()
  constructor (private readonly max: number) {}

  of (value: string): string {
    if (this.seen.has(value)) return value
    if (this.seen.size >= this.max) return 'other'
    this.seen.add(value)
    return value
  }
}
