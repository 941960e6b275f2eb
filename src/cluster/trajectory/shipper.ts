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
  /** A batch that failed is tried again after this long (or at once when the link comes back). */
  retryMs: 500
}

export type ShipSend = (batch: ShipBatch) => Promise<ShipAck>

interface Waiter { upTo: number, resolve: () => void }

export class TrajectoryShipper {
  private busy = false
  private timer: NodeJS.Timeout | undefined
  /** True while the control link is joined; flushes do not wait while it is not. */
  private up = false
  private readonly waiters = new Map<NodeLog, Waiter[]>()
  private closed = false

  /**
   * @param logs the node's logs, in the order they are served (the shipper removes settled ended ones)
   * @param send delivers a batch to `cp/trajectories` and resolves with its acknowledgement
   */
  constructor (private readonly nodeId: string, private readonly logs: Map<string, NodeLog>, private send: ShipSend | undefined, private readonly o = ShipDefaults) {}

  /** Sets how batches are sent (the control link, once the node has one). */
  setSend (send: ShipSend): void {
    this.send = send
    this.poke()
  }

  /** Something was written: it goes in the next batch. */
  poke (): void {
    if (this.timer !== undefined || this.closed) return
    this.timer = setTimeout(() => { this.timer = undefined; void this.ship() }, this.o.delayMs)
    this.timer.unref?.()
  }

  /** The control link (re)joined: everything not acknowledged goes again, now. */
  linkUp (): void {
    this.up = true
    for (const log of this.logs.values()) log.rewind()
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
      void this.ship()
    })
  }

  close (): void {
    this.closed = true
    clearTimeout(this.timer)
    this.linkDown()
  }

  private async ship (): Promise<void> {
    if (this.busy || this.send === undefined || this.closed) return
    const batch = this.collect()
    if (batch.logs.length === 0) return
    this.busy = true
    let again = true
    try {
      const ack = await this.send(batch)
      for (const a of ack.acks) {
        const log = this.logs.get(a.sandboxId)
        if (log === undefined) continue
        log.ack(a.upTo)
        this.settle(log)
      }
    } catch {
      for (const l of batch.logs) this.logs.get(l.sandboxId)?.rewind()
      again = false
      if (!this.closed) {
        clearTimeout(this.timer)
        this.timer = setTimeout(() => { this.timer = undefined; void this.ship() }, this.o.retryMs)
        this.timer.unref?.()
      }
    } finally {
      this.busy = false
    }
    if (again) void this.ship()
  }

  /** The next batch: round the logs with records not yet sent, within the bounds. */
  private collect (): ShipBatch {
    const batch: ShipBatch = { type: 'append', nodeId: this.nodeId, logs: [] }
    let records = 0
    let bytes = 0
    for (const log of [...this.logs.values()]) {
      if (log.sent >= log.count || log.inflight !== undefined) continue
      const room = this.o.maxBatchRecords - records
      if (room <= 0 || (records > 0 && bytes >= this.o.maxBatchBytes)) break
      const taken = log.take(room, Math.max(1, this.o.maxBatchBytes - bytes))
      if (taken.records.length === 0) continue
      batch.logs.push({ sandboxId: log.sandboxId, first: taken.first, records: taken.records })
      records += taken.records.length
      for (const r of taken.records) bytes += r.length
      // Served: it goes to the back, so one busy sandbox does not keep the others waiting.
      this.logs.delete(log.sandboxId)
      this.logs.set(log.sandboxId, log)
    }
    return batch
  }

  /** Wakes those waiting on what is now acknowledged; a finished log goes. */
  private settle (log: NodeLog): void {
    const list = this.waiters.get(log)
    if (list !== undefined) {
      const still = list.filter((w) => { if (log.acked >= w.upTo) { w.resolve(); return false } return true })
      if (still.length === 0) this.waiters.delete(log); else this.waiters.set(log, still)
    }
    if (log.ended && log.settled && this.logs.get(log.sandboxId) === log) {
      this.logs.delete(log.sandboxId)
      log.remove()
    }
  }
}
