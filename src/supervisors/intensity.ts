/**
 * Restart intensity: at most `maxRestarts` restarts within any `periodMs` window. One more and
 * the supervisor gives up — it stops its children and fails, so the failure climbs the tree
 * instead of looping forever at the bottom of it.
 */
export interface IntensityOptions {
  maxRestarts: number
  periodMs: number
}

/** OTP's default: 1 restart in 5 seconds. */
export const IntensityDefaults: IntensityOptions = { maxRestarts: 1, periodMs: 5000 }

export interface RestartIntensity {
  /** Records a restart now; returns false when it exceeds the allowed intensity. */
  allow (): boolean
}

export function createRestartIntensity (options: Partial<IntensityOptions> = {}, now: () => number = Date.now): RestartIntensity {
  const o = { ...IntensityDefaults, ...options }
  let restarts: number[] = []
  return {
    allow () {
      const t = now()
      restarts = restarts.filter((at) => t - at < o.periodMs)
      restarts.push(t)
      return restarts.length <= o.maxRestarts
    }
  }
}
