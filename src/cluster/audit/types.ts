/**
 * What the audit log holds and how it is bounded. One record per control action a principal
 * asked for (create, kill, exec, a file change, snapshot, fork, pause and resume, token and quota
 * changes…), whatever its outcome: who (tenant, key id), what (the action and the ids it names),
 * when, and how it ended (`ok`, or the public code it was refused with).
 */

const KiB = 1024
const MiB = 1024 * KiB

export const AuditDefaults = {
  /** The folder of the tenants' files in the control plane's data dir: `audit/<tenant>.log`. */
  dirName: 'audit',
  /** The one file of earlier versions (all tenants in one), still read by queries. */
  legacyFileName: 'audit.log',
  /** The file of records whose tenant is no tenant name (none should be): `_other.log`. */
  otherPartition: '_other',
  /** A tenant's file is rotated (`acme.log` → `acme.log.1` → …) once a write would take it past this. */
  maxFileBytes: 16 * MiB,
  /** Rotated files kept of each tenant besides its current one; the oldest goes. So 80 MiB a tenant. */
  keepFiles: 4,
  /** Bytes waiting for the disk over all tenants, at most: past them a record is dropped and counted. */
  maxQueuedBytes: 16 * MiB,
  /** And of one tenant: one tenant's burst fills its own queue, not the others'. */
  maxQueuedRecordsPerTenant: 20_000,
  maxQueuedBytesPerTenant: 4 * MiB,
  /** Without a data dir the log is this many newest records of each tenant in memory. */
  maxMemoryRecords: 10_000,
  /** An exec's argv is kept up to this many characters in all (never its stdin or output). */
  maxArgvChars: 1024,
  /** Paths, names and messages are kept up to this many characters. */
  maxTextChars: 1024,
  /** Sandbox ids one record lists (a create of 1,000 lists the first ones and counts all). */
  maxIds: 100,
  /** Records one query answers, at most, and the default. */
  maxQueryLimit: 1000,
  queryLimit: 100,
  /** One answer's records, at most this many bytes of JSON (it must fit a frame with its envelope). */
  maxQueryBytes: 768 * KiB,
  /** Queries reading the files at once; one more is OVERLOADED. */
  maxConcurrentQueries: 2,
  /** Drops (a full queue, a failed write) are logged at most once per this long. */
  dropLogEveryMs: 1000
}

export type AuditTunables = Pick<typeof AuditDefaults, 'maxFileBytes' | 'keepFiles' | 'maxQueuedBytes' | 'maxQueuedRecordsPerTenant' | 'maxQueuedBytesPerTenant' | 'maxMemoryRecords'>

/** One audited action. Optional fields are there when the request named them. */
export interface AuditRecord {
  /** When it was answered, ms since the epoch. */
  at: number
  /**
   * Its place among the records the control plane wrote since it started: the order of records
   * of one millisecond, which different tenants' files cannot tell otherwise.
   */
  seq?: number
  /** `sandbox.create`, `exec`, `file.write`, `token.create`…: the table in actions.ts. */
  action: string
  /** The principal: the key's tenant and id (never the key). */
  tenant: string
  keyId: string
  /** `ok`, or the public code (`WARREN_ERR_QUOTA`…). */
  outcome: string
  /** A refusal's field (`details.field`) and message. */
  field?: string
  message?: string
  /** How long the request took, ms. */
  ms: number
  sandbox?: string
  /** The sandboxes a create, fork or kill of many made or ended (at most `maxIds`), and how many in all. */
  sandboxes?: string[]
  count?: number
  /** Of a kill or fork of many: how many of its items were refused (their ids are not in `sandboxes`). */
  failed?: number
  exec?: string
  argv?: string[]
  argvTruncated?: true
  path?: string
  to?: string
  upload?: string
  snapshot?: string
  /** The tenant a token or quota change is for. */
  target?: string
  scopes?: string[]
  /** The id of the key a token-create made. */
  newKeyId?: string
  /** The key a revoke ended. */
  revokedKeyId?: string
  quotas?: Record<string, unknown>
  name?: string
  digest?: string
  /** A synthetic record: how many records were dropped (queue full, a write failed) before it. */
  dropped?: number
}

/** A query's filters, all optional; times are ms since the epoch. */
export interface AuditQuery {
  /** The principal's tenant (`target` for token and quota changes is not matched). */
  tenant?: string
  sandbox?: string
  /** An action, or its group: `sandbox` matches `sandbox.create`, `sandbox.kill`… */
  action?: string
  since?: number
  until?: number
  limit?: number
}

/** The newest `limit` matching records, oldest first; `truncated` when older ones matched too. */
export interface AuditPage {
  records: AuditRecord[]
  truncated: boolean
}

/** What the session needs of the audit log. */
export interface AuditSink {
  /** Queues a record; never waits for the disk (a full queue drops it, counted). */
  append (record: AuditRecord): void
  /** @throws WARREN_ERR_OVERLOADED when `maxConcurrentQueries` are reading */
  query (q: AuditQuery): Promise<AuditPage>
}
