/**
 * Warm pools: per key (layer stack + limits) a few sandboxes built ahead of demand, because
 * creating namespaces serializes in the kernel (~15 ms each) while a claim costs a map lookup.
 *
 * The target size adapts: a claim that finds the pool empty raises it (up to `max`), a quiet
 * period without misses lowers it (down to `min`). Refills run in the background, one at a time
 * per key, so a burst of claims never turns into a burst of kernel work on top of itself.
 */
export interface WarmPoolOptions<T> {
  /** Builds one sandbox for `key`. */
  create: (key: string) => Promise<T>
  /** Tears down one pooled sandbox (pool shrink, close). */
  destroy: (item: T) => Promise<void>
  min?: number
  max?: number
  /** Without a miss for this long, the target shrinks by one. */
  shrinkAfterMs?: number
  /** Told when a background build fails (the pool retries on the next claim). */
  onError?: (err: unknown, key: string) => void
}

export const WarmPoolDefaults = { min: 0, max: 16, shrinkAfterMs: 60_000 }

interface Entry<T> { items: T[], target: number, filling: boolean, lastMissAt: number }

export class WarmPool<T> {
  private readonly entries = new Map<string, Entry<T>>()
  private readonly refills = new Set<Promise<void>>()
  private closed = false
  private readonly o: Required<Omit<WarmPoolOptions<T>, 'onError'>> & Pick<WarmPoolOptions<T>, 'onError'>

  constructor (options: WarmPoolOptions<T>) {
    this.o = { ...WarmPoolDefaults, ...options }
  }

  /** Takes a ready sandbox for `key`, or undefined (a miss: the caller builds one itself). */
  claim (key: string): T | undefined {
    const entry = this.entry(key)
    const item = entry.items.shift()
    if (item === undefined) {
      entry.lastMissAt = Date.now()
      entry.target = Math.min(this.o.max, entry.target + 1)
    }
    this.refill(key, entry)
    return item
  }

  /** Starts keeping at least `n` ready sandboxes for `key` (e.g. at node start). */
  prewarm (key: string, n: number): void {
    const entry = this.entry(key)
    entry.target = Math.min(this.o.max, Math.max(entry.target, n))
    this.refill(key, entry)
  }

  /** Ready sandboxes per key (they count against the node's capacity). */
  sizes (): Record<string, number> {
    return Object.fromEntries([...this.entries].map(([k, e]) => [k, e.items.length]))
  }

  /** Total ready sandboxes. */
  get size (): number {
    let n = 0
    for (const e of this.entries.values()) n += e.items.length
    return n
  }

  /** Destroys every pooled sandbox; later claims miss. */
  async close (): Promise<void> {
    this.closed = true
    // A build in flight finishes first (and destroys what it made), so nothing outlives close.
    await Promise.allSettled([...this.refills])
    const all = [...this.entries.values()].flatMap((e) => e.items.splice(0))
    await Promise.all(all.map((item) => this.o.destroy(item).catch(() => {})))
  }

  private entry (key: string): Entry<T> {
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { items: [], target: this.o.min, filling: false, lastMissAt: Date.now() }
      this.entries.set(key, entry)
    }
    return entry
  }

  private refill (key: string, entry: Entry<T>): void {
    if (entry.target > this.o.min && Date.now() - entry.lastMissAt > this.o.shrinkAfterMs) {
      entry.target--
      entry.lastMissAt = Date.now()
    }
    if (entry.filling || this.closed) return
    while (entry.items.length > entry.target) {
      const extra = entry.items.pop()!
      void this.o.destroy(extra).catch(() => {})
    }
    if (entry.items.length >= entry.target) return
    entry.filling = true
    const work = (async () => {
      try {
        while (!this.closed && entry.items.length < entry.target) {
          const item = await this.o.create(key)
          if (this.closed) { await this.o.destroy(item).catch(() => {}); return }
          entry.items.push(item)
        }
      } catch (err) {
        this.o.onError?.(err, key)
      } finally {
        entry.filling = false
      }
    })()
    this.refills.add(work)
    void work.finally(() => this.refills.delete(work))
  }
}
