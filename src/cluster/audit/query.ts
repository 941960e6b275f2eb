/**
 * Which records a query matches, and the bounded collector that keeps the newest of them: a
 * query may scan every file, but it holds at most `limit` records and `maxQueryBytes` of them.
 */
import { AuditDefaults, type AuditPage, type AuditQuery, type AuditRecord } from './types.js'

/** True when `r` passes every filter `q` gives. */
export function matches (r: AuditRecord, q: AuditQuery): boolean {
  if (q.since !== undefined && r.at < q.since) return false
  if (q.until !== undefined && r.at >= q.until) return false
  if (q.tenant !== undefined && r.tenant !== q.tenant) return false
  if (q.action !== undefined && r.action !== q.action && !r.action.startsWith(`${q.action}.`)) return false
  if (q.sandbox !== undefined && r.sandbox !== q.sandbox && r.sandboxes?.includes(q.sandbox) !== true) return false
  return true
}

/** True when `a` was written before `b`: by time, then by `seq` within one millisecond (records of earlier versions have none). */
function older (a: AuditRecord, b: AuditRecord): boolean {
  return a.at !== b.at ? a.at < b.at : (a.seq ?? 0) < (b.seq ?? 0)
}

/**
 * Keeps the newest matching records seen, by `at` then `seq`, within a count and a byte budget; records of
 * one `at` in the order offered. The files of several tenants are offered one after another, each
 * in its own order, so a record may come older than the ones kept: it is placed by its time.
 */
export class Collector {
  /** Oldest first, by (at, order offered). */
  private readonly kept: Array<{ record: AuditRecord, bytes: number }> = []
  private bytes = 0
  private dropped = false
  private readonly limit: number

  constructor (private readonly q: AuditQuery, private readonly maxBytes = AuditDefaults.maxQueryBytes) {
    this.limit = q.limit ?? AuditDefaults.queryLimit
  }

  /** Offers one record with its size as JSON. */
  offer (record: AuditRecord, bytes: number): void {
    if (!matches(record, this.q)) return
    const full = this.kept.length >= this.limit || this.bytes + bytes > this.maxBytes
    if (full && this.kept.length > 0 && older(record, this.kept[0]!.record)) { this.dropped = true; return }
    // Where it goes: after every kept record not newer than it (the usual case: at the end).
    let lo = 0
    let hi = this.kept.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (older(record, this.kept[mid]!.record)) hi = mid
      else lo = mid + 1
    }
    this.kept.splice(lo, 0, { record, bytes })
    this.bytes += bytes
    while (this.kept.length > this.limit || (this.bytes > this.maxBytes && this.kept.length > 1)) {
      this.bytes -= this.kept.shift()!.bytes
      this.dropped = true
    }
  }

  /** Offers one line of the file; a line that is not a record (a torn last write) is passed over. */
  offerLine (line: string): void {
    if (line === '') return
    let record: AuditRecord
    try { record = JSON.parse(line) as AuditRecord } catch { return }
    if (record === null || typeof record !== 'object' || typeof record.at !== 'number' || typeof record.action !== 'string') return
    this.offer(record, Buffer.byteLength(line))
  }

  page (): AuditPage {
    return { records: this.kept.map((k) => k.record), truncated: this.dropped }
  }
}
