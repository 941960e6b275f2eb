/**
 * Seeded randomness for the simulator: a small PRNG (mulberry32) and the samplers the workload
 * needs. Same seed, same numbers, on every machine — nothing here reads Math.random.
 */

export type Rng = () => number

/** mulberry32: 32 bits of state, period 2^32, good enough for workload sampling. Returns [0, 1). */
export function createRng (seed: number): Rng {
  let a = (seed >>> 0) ^ 0x9e3779b9
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A new independent stream derived from a seed and a label (so adding a consumer does not shift the others). */
export function deriveSeed (seed: number, label: string): number {
  let h = 2166136261 ^ (seed >>> 0)
  for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 16777619)
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/** Exponential with the given mean. */
export function exponential (rng: Rng, mean: number): number {
  return -Math.log(1 - rng()) * mean
}

/** Standard normal (Box–Muller, one value per call; the second is discarded for simplicity). */
export function normal (rng: Rng): number {
  let u = rng()
  while (u <= 0) u = rng()
  const v = rng()
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
}

/** Lognormal given its median and sigma (of the underlying normal). */
export function lognormal (rng: Rng, median: number, sigma: number): number {
  return median * Math.exp(sigma * normal(rng))
}

/** Poisson count with the given mean (Knuth for small means, normal approximation above 30). */
export function poisson (rng: Rng, mean: number): number {
  if (mean <= 0) return 0
  if (mean > 30) return Math.max(0, Math.round(mean + Math.sqrt(mean) * normal(rng)))
  const l = Math.exp(-mean)
  let k = 0
  let p = 1
  for (;;) {
    p *= rng()
    if (p <= l) return k
    k++
  }
}

/** The z-quantiles of the standard normal at p (Acklam's rational approximation). */
export function normalQuantile (p: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239]
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572]
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783]
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416]
  const lo = 0.02425
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p))
    return (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1)
  }
  if (p > 1 - lo) return -normalQuantile(1 - p)
  const q = p - 0.5
  const r = q * q
  return (((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
}

/** Zipf over items 0..n-1 (item 0 most popular), P(i) ∝ 1/(i+1)^s. CDF precomputed, sampling by binary search. */
export interface Zipf { readonly n: number, sample (): number, probability (i: number): number }

export function createZipf (rng: Rng, n: number, s = 1): Zipf {
  const cdf = new Float64Array(n)
  let sum = 0
  for (let i = 0; i < n; i++) { sum += 1 / Math.pow(i + 1, s); cdf[i] = sum }
  for (let i = 0; i < n; i++) cdf[i]! /= sum
  cdf[n - 1] = 1
  return {
    n,
    sample () {
      const u = rng()
      let lo = 0
      let hi = n - 1
      while (lo < hi) {
        const mid = (lo + hi) >> 1
        if (cdf[mid]! > u) hi = mid
        else lo = mid + 1
      }
      return lo
    },
    probability (i) { return i === 0 ? cdf[0]! : cdf[i]! - cdf[i - 1]! }
  }
}

/** Picks from weighted choices. */
export function weighted<T> (rng: Rng, choices: ReadonlyArray<readonly [T, number]>): T {
  let total = 0
  for (const [, w] of choices) total += w
  let u = rng() * total
  for (const [v, w] of choices) { u -= w; if (u < 0) return v }
  return choices[choices.length - 1]![0]
}
