/** Sample collections for the summary: growable float arrays read as percentiles. */

export interface Percentiles { p50: number, p90: number, p99: number, max: number }

export class Samples {
  private a = new Float64Array(1024)
  length = 0

  push (v: number): void {
    if (this.length === this.a.length) { const b = new Float64Array(this.a.length * 2); b.set(this.a); this.a = b }
    this.a[this.length++] = v
  }

  /** Nearest-rank percentiles, rounded to µs. */
  percentiles (): Percentiles {
    if (this.length === 0) return { p50: 0, p90: 0, p99: 0, max: 0 }
    const s = this.a.subarray(0, this.length).sort()
    const q = (p: number): number => round3(s[Math.min(s.length - 1, Math.floor(p * s.length))]!)
    return { p50: q(0.5), p90: q(0.9), p99: q(0.99), max: round3(s[s.length - 1]!) }
  }
}

export function round3 (v: number): number { return Math.round(v * 1000) / 1000 }
