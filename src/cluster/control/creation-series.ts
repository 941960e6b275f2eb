/**
 * The control plane's recent creations, second by second: how many sandboxes were made and how
 * many failed, and the latency percentiles of those made, for the last ten minutes. The live
 * page charts it (`cluster-stats`); it is a fixed ring of buckets, so it holds the same memory
 * whether the cluster makes one sandbox an hour or five thousand a second.
 *
 * Latencies go into a log-spaced histogram per second (no samples are kept): a percentile is
 * read back as the upper bound of the bucket it falls in, within `growth` (20 %) of the truth.
 */

export const CreationSeriesDefaults = {
  /** Seconds kept: the ring's length. */
  windowSec: 600,
  /** The first bucket's upper bound, in ms: faster creations count as this. */
  firstBoundMs: 1,
  /** Each bucket's bound is the previous one's times this. */
  growth: 1.2,
  /** Buckets per second (the last holds everything slower: 1.2^71 ms is ~7 min, past any create's deadline). */
  buckets: 72
}

/** One second of creations, as `cluster-stats` answers it. */
export interface CreationPoint {
  /** The second's start, ms since the epoch. */
  t: number
  created: number
  failed: number
  /** Latency percentiles of the sandboxes made in that second, ms; absent when none was. */
  p50?: number
  p90?: number
  p99?: number
}

interface Bucket { second: number, created: number, failed: number, hist: Uint32Array }

/** A ring of per-second creation counts and latency histograms. */
export class CreationSeries {
  private readonly ring: Bucket[]
  private readonly bounds: number[]

  constructor (private readonly now: () => number = Date.now, private readonly o = CreationSeriesDefaults) {
    this.ring = Array.from({ length: o.windowSec }, () => ({ second: -1, created: 0, failed: 0, hist: new Uint32Array(o.buckets) }))
    this.bounds = Array.from({ length: o.buckets }, (_, i) => o.firstBoundMs * o.growth ** i)
  }

  /**
   * Counts one outcome of a create request's batch, at the time it is known.
   * @param created sandboxes made, each taking `latencyMs`
   * @param failed sandboxes that could not be made
   * @param latencyMs from the request's start to this outcome
   */
  record (created: number, failed: number, latencyMs: number): void {
    if (created <= 0 && failed <= 0) return
    const b = this.bucket(Math.floor(this.now() / 1000))
    b.created += Math.max(0, created)
    b.failed += Math.max(0, failed)
    if (created > 0) b.hist[this.indexOf(latencyMs)]! += created
  }

  /**
   * The last `windowSec` seconds, oldest first, one point a second (seconds with nothing in them too).
   * @param windowSec 1 to the ring's length
   */
  read (windowSec = this.o.windowSec): CreationPoint[] {
    const n = Math.max(1, Math.min(this.o.windowSec, Math.floor(windowSec)))
    const last = Math.floor(this.now() / 1000)
    const out: CreationPoint[] = []
    for (let s = last - n + 1; s <= last; s++) {
      const b = this.ring[s % this.o.windowSec]!
      if (b.second !== s) { out.push({ t: s * 1000, created: 0, failed: 0 }); continue }
      out.push({ t: s * 1000, created: b.created, failed: b.failed, ...(b.created > 0 ? this.percentiles(b) : {}) })
    }
    return out
  }

  private bucket (second: number): Bucket {
    const b = this.ring[second % this.o.windowSec]!
    if (b.second !== second) {
      // A bucket from a lap ago (or never used) starts afresh for this second.
      b.second = second
      b.created = 0
      b.failed = 0
      b.hist.fill(0)
    }
    return b
  }

  private indexOf (ms: number): number {
    if (!(ms > this.o.firstBoundMs)) return 0
    const i = Math.ceil(Math.log(ms / this.o.firstBoundMs) / Math.log(this.o.growth))
    return Math.min(this.o.buckets - 1, i)
  }

  private percentiles (b: Bucket): { p50: number, p90: number, p99: number } {
    const at = (q: number): number => {
      const rank = Math.ceil(q * b.created)
      let seen = 0
      for (let i = 0; i < b.hist.length; i++) {
        seen += b.hist[i]!
        if (seen >= rank) return Math.round(this.bounds[i]! * 10) / 10
      }
      return Math.round(this.bounds[this.bounds.length - 1]! * 10) / 10
    }
    return { p50: at(0.5), p90: at(0.9), p99: at(0.99) }
  }
}
