/**
 * How much unread command output a node holds, and who may send more: credit flow control
 * between the node's output buffers and the backends that produce output.
 *
 * Each command gets an `ExecCredit`. What it holds (appended, not yet read) plus what it was
 * granted and has not used yet stays within `execBufferBytes`; all commands of the node together
 * stay within `nodeBufferBytes`. Credit comes back as the consumer reads: freed bytes are granted
 * again, first to the commands holding least, so when the node is full the producers with most
 * buffered are the ones that wait. A full node still gives each command `minWindowBytes`, out of
 * a reserve of its own (`minWindowReserveBytes`), so one tenant's unread output does not stop
 * another's command; only when that reserve is spent too does a new command wait from its start.
 *
 * A backend that cannot pause its output (functions) reserves its whole cap before it runs, and
 * is refused when the node cannot hold it (see `reserve`).
 *
 * A backend that honours credit (`Backend.outputCredit`) stops reading its command's output at
 * zero credit, so the command blocks on write, as it would on a slow terminal.
 */
import type { OutputCredit } from '../../backends/types.js'

/** The output bounds of a node, in one place; `NodeAgentOptions.output` overrides them. */
export const OutputDefaults = {
  /** The largest `maxOutputBytes` a command may ask for; a larger one is refused. */
  maxOutputBytes: 64 * 1024 * 1024,
  /**
   * Unread output one command may hold on its node (its credit window); also the largest cap of
   * a command whose backend cannot pause it.
   */
  execBufferBytes: 4 * 1024 * 1024,
  /** Unread output all commands of a node may hold together. */
  nodeBufferBytes: 256 * 1024 * 1024,
  /** What a command is given even when the node total is reached: one agent read. */
  minWindowBytes: 64 * 1024,
  /** Room beyond `nodeBufferBytes` for those minimum windows, so the hard bound is the sum of the two. */
  minWindowReserveBytes: 32 * 1024 * 1024
}

export type OutputLimits = typeof OutputDefaults

/** One command's share of the pool: the credit its backend sees, and the counts the pool keeps. */
export class ExecCredit implements OutputCredit {
  /** Bytes appended to the command's output and not read yet. */
  held = 0
  /** Bytes granted to the producer and not used yet (below 0 for one that ignores credit). */
  outstanding = 0
  readonly windowBytes: number
  private grant: ((bytes: number) => void) | undefined
  private closed = false
  /** Set aside once and never granted more (a producer that cannot be paused). */
  private readonly fixed: boolean

  /** @param fixedBytes set that much aside and grant no more (0: a window that grants go on refilling) */
  constructor (private readonly pool: OutputPool, fixedBytes = 0) {
    this.fixed = fixedBytes > 0
    const n = pool.available(this)
    this.windowBytes = this.fixed ? Math.min(n, fixedBytes) : n
    if (this.fixed) pool.forget(this)
    this.change(() => { this.outstanding = this.windowBytes })
  }

  /** What this command counts against the node: what it holds and may still be sent. */
  get weight (): number { return this.held + Math.max(0, this.outstanding) }

  onGrant (grant: (bytes: number) => void): void { this.grant = grant }

  /** The producer delivered `n` bytes (it used that much credit). */
  used (n: number): void {
    if (this.closed) return
    this.change(() => { this.outstanding -= n; this.held += n })
  }

  /** The consumer read `n` bytes: they are freed, and granted again where there is room. */
  freed (n: number): void {
    if (this.closed || n <= 0) return
    this.change(() => { this.held -= n })
    this.pool.refill(this)
  }

  /** The producer ended: credit it did not use is given back to the node. */
  ended (): void {
    if (this.closed) return
    this.change(() => { this.outstanding = 0 })
    this.pool.refill(undefined)
  }

  /** The command's output is gone (read to its end, dropped, or its sandbox ended). */
  close (): void {
    if (this.closed) return
    this.change(() => { this.held = 0; this.outstanding = 0 })
    this.closed = true
    this.grant = undefined
    this.pool.forget(this)
    this.pool.refill(undefined)
  }

  /** @internal Gives the producer `bytes` more credit (the pool decides how much). */
  give (bytes: number): void {
    if (this.closed || this.fixed || bytes <= 0) return
    this.change(() => { this.outstanding += bytes })
    this.grant?.(bytes)
  }

  get isClosed (): boolean { return this.closed }

  private change (fn: () => void): void {
    const before = this.weight
    fn()
    this.pool.adjust(this.weight - before)
  }
}

/** The node's pool of output buffer space, shared by the commands of all its sandboxes. */
export class OutputPool {
  readonly limits: OutputLimits
  /** The weight of every open command together. */
  private committed = 0
  /** Commands given less than their room because the node was full; served first when it frees up. */
  private readonly starved = new Set<ExecCredit>()

  constructor (limits: Partial<OutputLimits> = {}) {
    this.limits = { ...OutputDefaults, ...limits }
  }

  /** Bytes held or granted over the node's commands now. */
  get total (): number { return this.committed }

  /** Opens the credit of one command; its window is what the pool can give now. */
  openExec (): ExecCredit {
    return new ExecCredit(this)
  }

  /**
   * Opens the credit of a command that cannot be paused: `bytes` (its cap) are set aside for it
   * whole, within the node total. Undefined when the node cannot hold that much now.
   */
  reserve (bytes: number): ExecCredit | undefined {
    if (bytes > this.limits.nodeBufferBytes - this.committed) return undefined
    return new ExecCredit(this, Math.max(1, bytes))
  }

  /**
   * @internal How much more `credit` may be given now: its room within `execBufferBytes`, as far
   * as the node total allows, but never below its `minWindowBytes`.
   */
  available (credit: ExecCredit): number {
    const { execBufferBytes, nodeBufferBytes, minWindowBytes, minWindowReserveBytes } = this.limits
    const room = Math.max(0, execBufferBytes - credit.weight)
    const nodeRoom = nodeBufferBytes - this.committed
    const floor = Math.min(minWindowBytes - credit.weight, nodeBufferBytes + minWindowReserveBytes - this.committed)
    const n = Math.max(0, Math.min(room, Math.max(nodeRoom, floor)))
    if (n < room) this.starved.add(credit)
    else this.starved.delete(credit)
    return n
  }

  /** @internal A command's weight changed by `delta`. */
  adjust (delta: number): void {
    this.committed += delta
  }

  /** @internal Drops a closed command. */
  forget (credit: ExecCredit): void {
    this.starved.delete(credit)
  }

  /**
   * Grants freed space: first to the starved commands, those holding least first, each an equal
   * share of what is free (so those holding most wait); then to `freedBy`, the command whose
   * output was just read.
   */
  refill (freedBy: ExecCredit | undefined): void {
    if (this.starved.size > 0) {
      const waiting = [...this.starved].filter((c) => c !== freedBy).sort((a, b) => a.weight - b.weight)
      const free = this.limits.nodeBufferBytes - this.committed
      const share = Math.max(this.limits.minWindowBytes, Math.floor(free / Math.max(1, waiting.length)))
      for (const c of waiting) {
        const n = Math.min(this.available(c), share)
        if (n < this.limits.execBufferBytes - c.weight) this.starved.add(c)
        c.give(n)
      }
    }
    if (freedBy !== undefined && !freedBy.isClosed) freedBy.give(this.available(freedBy))
  }
}
