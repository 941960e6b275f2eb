/**
 * Warm pools: per key (layer stack + limits) a few sandboxes built ahead of demand, because
 * creating namespaces serializes in the kernel (~15 ms each) while a claim costs a map lookup.
 *
 * The target size adapts: a claim that finds the pool empty raises it (up to `max`), a quiet
 * period without misses lowers it (down to `min`). Refills run in the background, one at a time
 * per key, so a burst of claims never turns into a burst of kernel work on top of itself.
 *
 * Keys are what tenants ask for (each distinct set of limits is one), so what the pool holds is
 * bounded whatever they ask: at most `maxTotal` ready sandboxes over all keys (a key that needs
 * room takes it from the least recently used other key), and a sweep every `shrinkAfterMs`
 * lowers quiet keys' targets and forgets a key nobody has claimed for `idleKeyMs` (unless it was
 * prewarmed), so a shape asked for once does not keep a sandbox forever.
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
  /** The most ready sandboxes over all keys. */
  maxTotal?: number
  /** A key not claimed for this long holds nothing and is forgotten (a prewarmed one keeps `min`). */
  idleKeyMs?: number
  /** Told when a background build fails (the pool retries on the next claim). */
  onError?: (err: unknown, key: string) => void
}

export const WarmPoolDefaults = { min: 0, max: 16, shrinkAfterMs: 60_000, maxTotal: 64, idleKeyMs: 300_000 }

interface Entry<T> {
  items: T[]
  target: number
  filling: boolean
  lastMissAt: number
  lastUsedAt: number
  /** The pool's count of claims and prewarms when this key last had one: which key was used least recently. */
  usedTurn: number
  prewarmed: boolean
}

export class WarmPool<T> {
  private readonly entries = new Map<string, Entry<T>>()
  private readonly refills = new Set<Promise<void>>()
  private closed = false
  private turn = 0
  private sweeper: NodeJS.Timeout | undefined
  private readonly o: Required<Omit<WarmPoolOptions<T>, 'onError'>> & Pick<WarmPoolOptions<T>, 'onError'>

  constructor (options: WarmPoolOptions<T>) {
    this.o = { ...WarmPoolDefaults, ...options }
  }

  /** Takes a ready sandbox for `key`, or undefined (a miss: the caller builds one itself). */
  claim (key: string): T | undefined {
    const entry = this.entry(key)
    this.used(entry)
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
    this.used(entry)
    entry.prewarmed = true
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
    clearInterval(this.sweeper)
    // A build in flight finishes first (and destroys what it made), so nothing outlives close.
    await Promise.allSettled([...this.refills])
    const all = [...this.entries.values()].flatMap((e) => e.items.splice(0))
    await Promise.all(all.map((item) => this.o.destroy(item).catch(() => {})))
  }

  private entry (key: string): Entry<T> {
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { items: [], target: this.o.min, filling: false, lastMissAt: Date.now(), lastUsedAt: Date.now(), usedTurn: this.turn, prewarmed: false }
      this.entries.set(key, entry)
      this.sweeper ??= setInterval(() => this.sweep(), this.o.shrinkAfterMs).unref()
    }
    return entry
  }

  private used (entry: Entry<T>): void {
    entry.lastUsedAt = Date.now()
    entry.usedTurn = ++this.turn
  }

  /** Lowers quiet keys' targets (destroying what is over them) and forgets idle keys. */
  sweep (): void {
    const now = Date.now()
    for (const [key, entry] of this.entries) {
      if (!entry.prewarmed && now - entry.lastUsedAt > this.o.idleKeyMs) entry.target = 0
      this.refill(key, entry)
      if (entry.target === 0 && entry.items.length === 0 && !entry.filling) this.entries.delete(key)
    }
  }

  /** Ready sandboxes over all keys, and the builds in flight for keys other than `asking` (its own is the one asking for room). */
  private held (asking: Entry<T>): number {
    let n = 0
    for (const e of this.entries.values()) n += e.items.length + (e.filling && e !== asking ? 1 : 0)
    return n
  }

  /** Makes room for one more under `maxTotal`: destroys a ready sandbox of the least recently used key other than `key`. */
  private makeRoom (key: string, entry: Entry<T>): boolean {
    if (this.held(entry) < this.o.maxTotal) return true
    let victim: Entry<T> | undefined
    for (const [k, e] of this.entries) {
      if (k !== key && e.items.length > 0 && e.usedTurn < entry.usedTurn && (victim === undefined || e.usedTurn < victim.usedTurn)) victim = e
    }
    if (victim === undefined) return false
    victim.target = Math.min(victim.target, victim.items.length - 1)
    void this.o.destroy(victim.items.pop()!).catch(() => {})
    return true
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
    if (entry.items.length >= entry.target || !this.makeRoom(key, entry)) return
    entry.filling = true
    const work = (async () => {
      try {
        // Each build after the first needs room of its own.
        for (let built = 0; !this.closed && entry.items.length < entry.target; built++) {
          if (built > 0 && !this.makeRoom(key, entry)) return
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
