/**
 * A token bucket: `ratePerS` tokens a second, holding at most `burst`. Taking from an empty
 * bucket fails and says how long until enough tokens have dripped in.
 */
export interface TokenBucket {
  /** Takes `n` tokens; returns 0 on success or the ms to wait before `n` are there. */
  take (n?: number): number
}

export function createTokenBucket (ratePerS: number, burst: number, now: () => number = performance.now.bind(performance)): TokenBucket {
  let tokens = burst
  let last = now()
  return {
    take (n = 1) {
      const t = now()
      tokens = Math.min(burst, tokens + ((t - last) / 1000) * ratePerS)
      last = t
      if (tokens >= n) { tokens -= n; return 0 }
      return Math.max(1, Math.ceil(((n - tokens) / ratePerS) * 1000))
    }
  }
}
