/**
 * The workload: when sandboxes are asked for and what each one is. DSec-shaped by default
 * (about 3 M creations a day, half of them in RL-step bursts of up to 5,000/s, lifetimes with a
 * median of 16 min and a heavy tail, CPU use far below the request, Zipf image popularity);
 * every parameter can be overridden.
 */
import { createZipf, deriveSeed, createRng, exponential, lognormal, weighted, type Rng, type Zipf } from './random.js'
import type { BackendKind } from '../src/backends/types.js'

export interface WorkloadConfig {
  /** Creations over one day (scaled to the simulated duration). */
  creationsPerDay: number
  /** Share of creations arriving in bursts (RL steps starting). */
  burstShare: number
  /** Creation rate inside a burst, per second. */
  burstRatePerS: number
  /** Median sandboxes per burst (lognormal, sigma `burstSizeSigma`). */
  burstSizeMedian: number
  burstSizeSigma: number
  /** Base (non-burst) rate swings by ± this share over the day, peaking at `peakHour`. */
  diurnalAmplitude: number
  peakHour: number
  /** Lifetimes: lognormal with this median (ms) and sigma. */
  lifetimeMedianMs: number
  lifetimeSigma: number
  /** CPU requests and their weights. */
  cpuRequests: Array<readonly [number, number]>
  /** Memory requests (MiB) and their weights. */
  memoryRequestsMiB: Array<readonly [number, number]>
  /** Share of sandboxes whose CPU use stays at or below `lowUseFraction` of the request. */
  lowUseShare: number
  lowUseFraction: number
  /** Images: Zipf over bases and workspaces, exponent `zipfS`. */
  bases: number
  workspaces: number
  zipfS: number
  /** Share of sandboxes with at least one layer beyond the base. */
  extraLayerShare: number
  backend: BackendKind
  /**
   * Languages of the environments: image size and the share of it a cold start reads (DSec's
   * figures), with their weights. A start on a node without the image fetches that much.
   */
  languages: Array<{ name: string, weight: number, imageBytes: number, readShare: number }>
}

export const DSecWorkload: WorkloadConfig = {
  creationsPerDay: 3_000_000,
  burstShare: 0.5,
  burstRatePerS: 5000,
  burstSizeMedian: 20_000,
  burstSizeSigma: 0.5,
  diurnalAmplitude: 0.3,
  peakHour: 14,
  lifetimeMedianMs: 16 * 60_000,
  lifetimeSigma: 2.15,
  cpuRequests: [[0.5, 0.3], [1, 0.5], [2, 0.2]],
  memoryRequestsMiB: [[256, 0.3], [512, 0.4], [1024, 0.2], [2048, 0.1]],
  lowUseShare: 0.9,
  lowUseFraction: 0.05,
  bases: 11_266,
  workspaces: 102_171,
  zipfS: 1,
  extraLayerShare: 0.678,
  backend: 'container',
  languages: [
    { name: 'python', weight: 0.6, imageBytes: 6.0e9, readShare: 0.060 },
    { name: 'java', weight: 0.2, imageBytes: 12.1e9, readShare: 0.092 },
    { name: 'cpp', weight: 0.2, imageBytes: 4.9e9, readShare: 0.087 }
  ]
}

export interface SandboxSpec {
  backend: BackendKind
  cpus: number
  memoryMiB: number
  /** CPUs actually used (a fraction of `cpus`). */
  cpuUse: number
  lifetimeMs: number
  layers: string[]
  /** Bytes a cold start reads from the image (fetched when the node lacks the base layer). */
  coldReadBytes: number
}

const DAY_MS = 86_400_000

export class Workload {
  readonly config: WorkloadConfig
  private readonly arrivalsRng: Rng
  private readonly specRng: Rng
  private readonly baseZipf: Zipf
  private readonly wsZipf: Zipf
  private readonly baseMeanPerMs: number
  private readonly baseMaxPerMs: number
  private readonly burstMeanGapMs: number
  private nextBase: number
  private nextBurstStart: number
  /** The burst being delivered: next arrival time and how many remain; later bursts queue behind it. */
  private burstAt = Infinity
  private burstLeft = 0
  private queuedBursts = 0
  private readonly burstGapMs: number

  /** The language choices, built once (a spec is drawn millions of times a simulated day). */
  private readonly languages: ReadonlyArray<readonly [WorkloadConfig['languages'][number], number]>

  constructor (seed: number, overrides: Partial<WorkloadConfig> = {}) {
    this.config = { ...DSecWorkload, ...overrides }
    const c = this.config
    this.arrivalsRng = createRng(deriveSeed(seed, 'arrivals'))
    this.specRng = createRng(deriveSeed(seed, 'specs'))
    this.languages = c.languages.map((l) => [l, l.weight] as const)
    const imgRng = createRng(deriveSeed(seed, 'images'))
    this.baseZipf = createZipf(imgRng, c.bases, c.zipfS)
    this.wsZipf = createZipf(imgRng, c.workspaces, c.zipfS)
    this.baseMeanPerMs = c.creationsPerDay * (1 - c.burstShare) / DAY_MS
    this.baseMaxPerMs = this.baseMeanPerMs * (1 + Math.abs(c.diurnalAmplitude))
    const meanBurst = c.burstSizeMedian * Math.exp(c.burstSizeSigma ** 2 / 2)
    const burstsPerDay = c.creationsPerDay * c.burstShare / meanBurst
    this.burstMeanGapMs = burstsPerDay > 0 ? DAY_MS / burstsPerDay : Infinity
    this.burstGapMs = 1000 / c.burstRatePerS
    this.nextBase = this.drawBase(0)
    this.nextBurstStart = Number.isFinite(this.burstMeanGapMs) ? exponential(this.arrivalsRng, this.burstMeanGapMs) : Infinity
  }

  /** Base-rate arrivals: a Poisson process with a diurnal rate, drawn by thinning. */
  private drawBase (from: number): number {
    if (this.baseMaxPerMs <= 0) return Infinity
    let t = from
    for (;;) {
      t += exponential(this.arrivalsRng, 1 / this.baseMaxPerMs)
      const rate = this.baseMeanPerMs * (1 + this.config.diurnalAmplitude * Math.cos(2 * Math.PI * (t - this.config.peakHour * 3_600_000) / DAY_MS))
      if (this.arrivalsRng() * this.baseMaxPerMs <= rate) return t
    }
  }

  private burstSize (): number {
    return Math.max(1, Math.round(lognormal(this.arrivalsRng, this.config.burstSizeMedian, this.config.burstSizeSigma)))
  }

  /** Time (ms) of the next arrival, without taking it. */
  peek (): number {
    this.advanceBursts()
    return Math.min(this.nextBase, this.burstAt)
  }

  /** Takes the next arrival; returns its time (ms, non-decreasing). */
  take (): number {
    const t = this.peek()
    if (t === this.burstAt) {
      this.burstLeft--
      this.burstAt = this.burstLeft > 0 ? t + this.burstGapMs : Infinity
      if (this.burstLeft === 0 && this.queuedBursts > 0) {
        this.queuedBursts--
        this.burstLeft = this.burstSize()
        this.burstAt = t + this.burstGapMs
      }
    } else {
      this.nextBase = this.drawBase(t)
    }
    return t
  }

  private advanceBursts (): void {
    // Burst starts due before the next arrival either start now or queue behind the current burst.
    while (this.nextBurstStart <= Math.min(this.nextBase, this.burstAt)) {
      const start = this.nextBurstStart
      this.nextBurstStart = start + exponential(this.arrivalsRng, this.burstMeanGapMs)
      if (this.burstLeft > 0) this.queuedBursts++
      else { this.burstLeft = this.burstSize(); this.burstAt = start }
    }
  }

  /** What one sandbox is. */
  spec (): SandboxSpec {
    const c = this.config
    const r = this.specRng
    const cpus = weighted(r, c.cpuRequests)
    const useFraction = r() < c.lowUseShare ? r() * c.lowUseFraction : c.lowUseFraction + r() * (1 - c.lowUseFraction)
    const layers = [`b${this.baseZipf.sample()}`]
    if (r() < c.extraLayerShare) layers.push(`w${this.wsZipf.sample()}`)
    const lang = weighted(r, this.languages)
    return {
      coldReadBytes: Math.round(lang.imageBytes * lang.readShare),
      backend: c.backend,
      cpus,
      memoryMiB: weighted(r, c.memoryRequestsMiB),
      cpuUse: cpus * useFraction,
      lifetimeMs: lognormal(r, c.lifetimeMedianMs, c.lifetimeSigma),
      layers
    }
  }

  /**
   * A sandbox already running when the simulation starts, from the steady state: its total
   * lifetime is length-biased (lognormal with mu + sigma^2) and it is uniformly far through it.
   */
  residentSpec (): SandboxSpec {
    const s = this.spec()
    const c = this.config
    const total = lognormal(this.specRng, c.lifetimeMedianMs * Math.exp(c.lifetimeSigma ** 2), c.lifetimeSigma)
    s.lifetimeMs = this.specRng() * total
    return s
  }

  /** Sandboxes running in the steady state at the mean rate (Little's law). */
  steadyStateConcurrent (): number {
    const c = this.config
    return Math.round(c.creationsPerDay / DAY_MS * c.lifetimeMedianMs * Math.exp(c.lifetimeSigma ** 2 / 2))
  }
}
