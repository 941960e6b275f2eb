/**
 * The node's trajectory shipper: takes records from the node's logs in order and sends them in
 * batches to the control plane's `cp/trajectories` over the control link, one batch in flight at
 * a time (bounded in records and bytes: the logs are the backlog). A batch not acknowledged (the
 * link dropped, the control plane restarted) is sent again, as is everything not acknowledged
 * after a reconnect; a log whose sandbox ended is removed once all of it is acknowledged.
 */
import type { NodeLog } from './node-log.js'
import type { ShipAck, ShipBatch } from './types.js'

export const ShipDefaults = {
  /** Records and bytes one batch carries at most (the bytes under the link's 1 MiB frame). */
  maxBatchRecords: 1000,
  maxBatchBytes: 512 * 1024,
  /** Records written within this long go in one batch. */
  delayMs: 20,
  /**
   * Batches go at most this often, also when someone waits for one: under load each carries
   * more, so the control plane commits (each one a write to disk) a bounded number a second.
   */
  minIntervalMs: 10,
  /** A batch that failed is tried again after this long (or at once when the link comes back). */
  retryMs: 500,
  /** How often how far each log is acknowledged is noted on disk. */
  saveAcksEveryMs: 1000
}

export type ShipSend = (batch: ShipBatch) => Promise<ShipAck>

interface Waiter { upTo: number, resolve: () => void }

export class TrajectoryShipper {
  private busy = false
  private timer: NodeJS.Timeout | undefined
  /** When the last batch went. */
  private lastSent = 0
  private readonly saveTimer: NodeJS.Timeout
  /** True while the control link is joined; flushes do not wait while it is not. */
  private up = false
  /** Logs with records not yet sent, in the order they are served. */
  private readonly unsent = new Set<NodeLog>()
  /** Logs acknowledged further since their acknowledgement was last noted on disk. */
  private readonly unsaved = new Set<NodeLog>()
  private readonly waiters = new Map<NodeLog, Waiter[]>()
  private closed = false

  /**
   * @param logs the node's logs by sandbox id (the shipper removes settled ended ones)
   * @param send delivers a batch to `cp/trajectories` and resolves with its acknowledgement
   */
  constructor (private readonly nodeId: string, private readonly logs: Map<string, NodeLog>, private send: ShipSend | undefined, private readonly o = ShipDefaults) {
    this.saveTimer = setInterval(() => this.saveAcks(), o.saveAcksEveryMs)
    this.saveTimer.unref?.()
  }

  /** Sets how batches are sent (the control link, once the node has one). */
  setSend (send: ShipSend): void {
    this.send = send
    this.schedule()
  }

  /** Something was written to `log`: it goes in the next batch. */
  poke (log: NodeLog): void {
    if (log.sent < log.count) this.unsent.add(log)
    this.schedule()
  }

  /** The control link (re)joined: everything not acknowledged goes again, now. */
  linkUp (): void {
    this.up = true
    for (const log of this.logs.values()) this.rewind(log)
    void this.ship()
  }

  /** The control link is down: nobody waits for acknowledgements meanwhile. */
  linkDown (): void {
    this.up = false
    for (const list of this.waiters.values()) for (const w of list) w.resolve()
    this.waiters.clear()
  }

  /**
   * Resolves once everything written to `log` so far is acknowledged, or after `timeoutMs`, or
   * at once while the link is down: a caller never waits on a control plane that is not there.
   */
  async flush (log: NodeLog, timeoutMs: number): Promise<void> {
    if (log.settled || !this.up || this.closed) return
    const upTo = log.count
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs)
      function done (): void { clearTimeout(timer); resolve() }
      let list = this.waiters.get(log)
      if (list === undefined) { list = []; this.waiters.set(log, list) }
      list.push({ upTo, resolve: done })
      this.schedule(0)
    })
  }

  /** Stops shipping (the node is closing); what is not acknowledged stays in the logs. */
  close (): void {
    this.closed = true
    clearTimeout(this.timer)
    clearInterval(this.saveTimer)
    this.saveAcks()
    this.linkDown()
  }

  /** Ships in `ms` (at once for 0), but no sooner than `minIntervalMs` after the last batch. */
  private schedule (ms = this.o.delayMs): void {
    if (this.closed) return
    const wait = Math.max(ms, this.lastSent + this.o.minIntervalMs - Date.now())
    if (wait <= 0 && !this.busy) { clearTimeout(this.timer); this.timer = undefined; void this.ship(); return }
    if (this.timer !== undefined) return
    this.timer = setTimeout(() => { this.timer = undefined; void this.ship() }, Math.max(wait, 1))
    this.timer.unref?.()
  }

  private rewind (log: NodeLog): void {
    log.rewind()
    if (log.sent < log.count) this.unsent.add(log)
  }

  private async ship (): Promise<void> {
    if (this.busy || this.send === undefined || this.closed) return
    const batch = this.collect()
    if (batch.logs.length === 0) return
    this.busy = true
    this.lastSent = Date.now()
    let again = true
    try {
      const ack = await this.send(batch)
      for (const a of ack.acks) {
        const log = this.logs.get(a.sandboxId)
        if (log === undefined) continue
        log.ack(a.upTo)
        this.unsaved.add(log)
        this.settle(log)
      }
    } catch {
      for (const l of batch.logs) { const log = this.logs.get(l.sandboxId); if (log !== undefined) this.rewind(log) }
      again = false
      if (!this.closed) {
        clearTimeout(this.timer)
        this.timer = setTimeout(() => { this.timer = undefined; void this.ship() }, this.o.retryMs)
        this.timer.unref?.()
      }
    } finally {
      this.busy = false
    }
    // More to send: at once for those waiting (within the pace), else after the usual delay.
    if (again && this.unsent.size > 0) this.schedule(this.waiters.size > 0 ? 0 : this.o.delayMs)
  }

  /** The next batch: round the logs with records not yet sent, within the bounds. */
  private collect (): ShipBatch {
    const batch: ShipBatch = { type: 'append', nodeId: this.nodeId, logs: [] }
    let records = 0
    let bytes = 0
    for (const log of [...this.unsent]) {
      if (records >= this.o.maxBatchRecords || (records > 0 && bytes >= this.o.maxBatchBytes)) break
      this.unsent.delete(log)
      if (log.inflight !== undefined || this.logs.get(log.sandboxId) !== log) continue // back in once acknowledged or rewound
      const taken = log.take(this.o.maxBatchRecords - records, Math.max(1, this.o.maxBatchBytes - bytes))
      if (taken.records.length === 0) continue
      batch.logs.push({ sandboxId: log.sandboxId, first: taken.first, records: taken.records })
      records += taken.records.length
      for (const r of taken.records) bytes += r.length
    }
    return batch
  }

  /** Wakes those waiting on what is now acknowledged; a finished log goes; one with more to send is served again. */
  private settle (log: NodeLog): void {
    const list = this.waiters.get(log)
    if (list !== undefined) {
      const still = list.filter((w) => { if (log.acked >= w.upTo) { w.resolve(); return false } return true })
      if (still.length === 0) this.waiters.delete(log); else this.waiters.set(log, still)
    }
    if (log.ended && log.settled && this.logs.get(log.sandboxId) === log) {
      this.logs.delete(log.sandboxId)
      this.unsaved.delete(log)
      log.remove()
    } else if (log.sent < log.count) {
      this.unsent.add(log)
    }
  }

  private saveAcks (): void {
    for (const log of this.unsaved) log.saveAck()
    this.unsaved.clear()
  }
}
