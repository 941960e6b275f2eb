/**
 * One line for a flood, not one per event, and no event lost from the count: the first event of a
 * kind is logged at once; the ones after it within `windowMs` are counted (with up to `maxSamples`
 * distinct samples, such as recipients or addresses) and summed up in one line when the window
 * ends; a window with events opens the next, a quiet one ends the flood. `close` sums up what is
 * still counted.
 */

/** What `createLogWindows` is told to log. */
export interface LogWindowSinks<K, E> {
  /** The first event of a flood of kind `key`, whole. */
  first: (key: K, event: E) => void
  /** `count` more events of kind `key` in the window just ended, and some of their samples. */
  summary: (key: K, count: number, samples: string[]) => void
}

export interface LogWindows<K, E> {
  /** One event of kind `key`; `sample` is what tells it apart (an address, a recipient). */
  note: (key: K, event: E, sample: string) => void
  /** True while a flood of kind `key` is being counted (its window is open). */
  flooding: (key: K) => boolean
  /** Sums up every open window now and stops. */
  close: () => void
}

interface Window { count: number, samples: Set<string>, timer: NodeJS.Timeout }

export function createLogWindows<K, E> (windowMs: number, sinks: LogWindowSinks<K, E>, maxSamples = 16): LogWindows<K, E> {
  const windows = new Map<K, Window>()
  const open = (key: K): Window => {
    const timer = setTimeout(() => summarize(key), windowMs)
    timer.unref()
    return { count: 0, samples: new Set(), timer }
  }
  const summarize = (key: K): void => {
    const w = windows.get(key)
    if (w === undefined) return
    if (w.count === 0) { windows.delete(key); return }
    sinks.summary(key, w.count, [...w.samples])
    // Still flooding: the next summary in a window's time; a quiet window ends them.
    windows.set(key, open(key))
  }
  return {
    note (key, event, sample) {
      const w = windows.get(key)
      if (w !== undefined) {
        w.count++
        if (w.samples.size < maxSamples) w.samples.add(sample)
        return
      }
      sinks.first(key, event)
      windows.set(key, open(key))
    },
    flooding: (key) => windows.has(key),
    close () {
      for (const [key, w] of windows) {
        clearTimeout(w.timer)
        if (w.count > 0) sinks.summary(key, w.count, [...w.samples])
      }
      windows.clear()
    }
  }
}
