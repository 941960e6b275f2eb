/**
 * The output cap of a call: stdout and stderr together may carry at most `maxBytes`; what goes
 * beyond is dropped. Both sides of the call count: the worker so a runaway writer does not flood
 * the channel, the main thread so a cap holds whatever the worker does.
 */

/** Counts bytes against one cap. */
export interface OutputBudget {
  /** Asks to send `n` bytes; returns how many of them fit (0..n). */
  take (n: number): number
  /** True once any byte was refused. */
  readonly truncated: boolean
}

/** Makes a budget of `maxBytes` bytes. */
export function createOutputBudget (maxBytes: number): OutputBudget {
  let left = Math.max(0, Math.floor(maxBytes))
  let truncated = false
  return {
    take (n) {
      const granted = Math.min(n, left)
      left -= granted
      if (granted < n) truncated = true
      return granted
    },
    get truncated () { return truncated }
  }
}

/** What a function may write: a string is sent as UTF-8. */
export function toBytes (data: unknown): Uint8Array {
  if (typeof data === 'string') return Buffer.from(data, 'utf8')
  if (data instanceof Uint8Array) return data
  throw new TypeError('write() takes a string or a Uint8Array')
}
