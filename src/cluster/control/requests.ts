/**
 * What an SDK may ask of its session, and the check each request passes as it comes off the
 * wire. A client can send anything msgpack encodes; nothing reaches the session's handlers, the
 * directory or a sandbox until its type is known and every field has its type. A bad field is
 * `WARREN_ERR_INVALID_ARGUMENT` with `details.field` naming it. The spec of a create is checked
 * by `parseSandboxSpec` (it has its own error, BAD_SPEC); bounds that belong to a sandbox
 * (output caps, page sizes) stay with the sandbox; this is the shape. argv is `parseArgv`'s.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { checkImageName, LAYER_KINDS, type LayerKind } from '../../images/index.js'
import { IamDefaults, isScope, type Quotas, type Scope } from '../iam/index.js'
import { SandboxDefaults, type FileRequest, type WireExecOptions } from '../sandbox/index.js'
import { parseArgv, SpecDefaults } from '../spec.js'
import { badEnvName, isPlainObject, stringMap } from '../spec-fields.js'
import { RECORD_STATES, type SandboxRecord } from './directory.js'
import { parseFileRequest } from './file-requests.js'
import { isDigest } from '../../images/blob/index.js'
import { TrajectoryDefaults } from '../trajectory/index.js'
import { CreationSeriesDefaults } from './creation-series.js'
import { AuditDefaults, type AuditQuery } from '../audit/index.js'

/** What an SDK may ask of its session. */
export type ClientRequest =
  | { type: 'create', spec?: unknown, count?: number, deadlineMs?: number }
  | { type: 'info', id: string }
  /** `tenant`: an admin reads another tenant's (the live page's tenant picker). */
  | { type: 'list', labels?: Record<string, string>, state?: SandboxRecord['state'], all?: boolean, limit?: number, tenant?: string }
  /** One sandbox (`id`, answered with its view), or many (`ids`, or the live ones with `labels`; answered with one outcome each). */
  | { type: 'kill', id: string }
  | { type: 'kill', ids: string[] }
  | { type: 'kill', labels: Record<string, string> }
  /** The sandbox lives `ttlMs` from now (its whole life within the spec's maximum). */
  | { type: 'set-ttl', id: string, ttlMs: number }
  /** Freezes a sandbox, or thaws it (answered with its view). */
  | { type: 'pause', id: string }
  | { type: 'resume', id: string }
  | { type: 'exec', id: string, execId: string, argv: string[], opts?: WireExecOptions }
  | { type: 'read', id: string, execId: string, fromSeq: number, maxBytes?: number, waitMs?: number }
  | { type: 'exec-kill', id: string, execId: string }
  | { type: 'exec-resize', id: string, execId: string, cols: number, rows: number }
  | { type: 'stdin', id: string, execId: string, offset: number, data?: Uint8Array, eof?: boolean }
  | { type: 'trajectory', id: string, fromSeq?: number, limit?: number, tenant?: string }
  /** Recorded bytes of a trajectory kept in the blob store (a step's `blob`), one range at a time. */
  | { type: 'trajectory-blob', id: string, digest: string, offset: number, length: number, tenant?: string }
  /** On the wire the file request's fields sit beside `type` and `id`; parsed, they are `req`. */
  | { type: 'files', id: string, req: FileRequest }
  /** `expiresInMs`: the key's life from now (1 s to 10 years); absent: it does not expire. */
  | { type: 'token-create', tenant: string, scopes: Scope[], expiresInMs?: number }
  /** Keys in id order (never a secret or hash), after `after`, of one tenant when given. */
  | { type: 'token-list', tenant?: string, after?: string, limit?: number }
  /** Revokes key `id` (the id inside `wrn_<id>_…`); its open sessions are closed. */
  | { type: 'token-revoke', id: string }
  /** A new admin key; the old one is revoked and its sessions closed. */
  | { type: 'admin-rotate' }
  | { type: 'tenant-list' }
  | { type: 'tenant-quotas', tenant: string, quotas?: Partial<Quotas> }
  | { type: 'nodes' }
  /** The live page's figures (admin): nodes with capacity and use, layer caches, creations of the last `windowSec` seconds. */
  | { type: 'cluster-stats', windowSec?: number }
  | { type: 'image-tag', name: string, digest: string, kind: LayerKind }
  | { type: 'image-list' }
  /** Cuts a snapshot of the sandbox, named `name` (`name:tag`, moved from another snapshot of the tenant that had it). */
  | { type: 'snapshot', id: string, name?: string, memory?: boolean }
  | { type: 'snapshots', sandboxId?: string, limit?: number }
  /** `id` is a snapshot's id or name. */
  | { type: 'snapshot-delete', id: string }
  /** One snapshot of the sandbox, then `count` sandboxes from it (`spec` laid over the sandbox's). */
  | { type: 'fork', id: string, count: number, spec?: unknown, deadlineMs?: number, memory?: boolean }
  | { type: 'hibernate', id: string }
  /**
   * A fresh sandbox from the trajectory of sandbox `id`, its steps applied up to `upTo` and each
   * command compared (`compare`); `spec` may give only labels and a TTL.
   */
  | { type: 'replay', id: string, upTo?: number, compare?: ReplayCompare, spec?: ReplaySpec }
  /** Sandbox `id` (lost or ended) made again under its id: from its newest snapshot, then the steps after it. */
  | { type: 'restore', id: string }
  /** Admin: the newest audit records matching the filters (`AuditQuery`). */
  | { type: 'audit-query', query: AuditQuery }

/** What a replay compares of each command: its exit code, or that and the sha256 of its stdout and stderr. */
export type ReplayCompare = 'exit' | 'output'
export const REPLAY_COMPARE: readonly ReplayCompare[] = ['exit', 'output']
/** What a replay may change of the recorded spec. */
export interface ReplaySpec { labels?: Record<string, string>, ttlMs?: number }

/** Bounds of the fields a request carries (not of the work it asks for). */
export const RequestLimits = {
  /** Sandbox ids are 16 characters; anything much longer is not one. */
  maxIdLength: 64,
  maxExecIdLength: SandboxDefaults.maxExecIdLength,
  maxPathLength: 4096,
  maxNameLength: 256,
  /** Label filters of a list, and env entries of an exec. */
  maxEntries: 256,
  maxEntryLength: 32 * 1024,
  /** A user name, or `uid[:gid]`. */
  maxUserLength: 256,
  /** Columns or rows of a pseudo-terminal. */
  maxTerminalCells: 1000,
  /** Sandboxes one kill may name (or match by labels). */
  maxKillIds: 1000,
  /** Sandboxes one fork may make. */
  maxFork: 1000
}

type Obj = Record<string, unknown>

function invalid (field: string, why: string): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} ${why}`, { field })
}

function text (v: unknown, field: string, max: number): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) invalid(field, `must be a string of 1 to ${max} characters`)
  return v
}

function count (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) invalid(field, 'must be an integer from 0 to 2^53 - 1')
  return v
}

function positive (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) invalid(field, 'must be an integer >= 1')
  return v
}

/** A checker of an integer from 1 to `max`, with one message for every way to miss it. */
function upTo (max: number): (v: unknown, field: string) => number {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) invalid(field, `must be an integer from 1 to ${max}`)
    return v
  }
}

function flag (v: unknown, field: string): boolean {
  if (typeof v !== 'boolean') invalid(field, 'must be true or false')
  return v
}

function bytes (v: unknown, field: string): Uint8Array {
  if (!(v instanceof Uint8Array)) invalid(field, 'must be bytes (a msgpack bin)')
  return v
}

function oneOf<T extends string> (v: unknown, field: string, allowed: readonly T[]): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) invalid(field, `must be one of ${allowed.join(', ')}`)
  return v as T
}

/** Label filters of a list: checked as a spec's labels are (no NUL, no `__proto__`), refused as INVALID_ARGUMENT. */
function labels (v: unknown, field: string): Record<string, string> {
  return stringMap(v, field, { maxEntries: RequestLimits.maxEntries, maxKey: RequestLimits.maxNameLength, maxValue: RequestLimits.maxEntryLength }, invalid)
}

/** An exec's env: as a spec's env (names without `=`, nothing holding NUL), refused as INVALID_ARGUMENT. */
function env (v: unknown, field: string): Record<string, string> {
  return stringMap(v, field, { maxEntries: RequestLimits.maxEntries, maxKey: RequestLimits.maxNameLength, maxValue: RequestLimits.maxEntryLength, badKey: badEnvName }, invalid)
}

/** A string that a C string can hold: 1 to `max` characters, none of them NUL. */
function cText (v: unknown, field: string, max: number): string {
  if (text(v, field, max).includes('\0')) invalid(field, 'must not hold NUL')
  return v as string
}

/** A terminal's columns or rows. */
const cells = upTo(RequestLimits.maxTerminalCells)

function terminalSize (v: unknown, field: string): { cols: number, rows: number } {
  if (!isPlainObject(v)) invalid(field, 'must be an object { cols, rows }')
  return { cols: cells(v.cols, `${field}.cols`), rows: cells(v.rows, `${field}.rows`) }
}

function execOptions (v: unknown): WireExecOptions {
  if (!isPlainObject(v)) invalid('opts', 'must be an object')
  return {
    ...(v.cwd !== undefined ? { cwd: cText(v.cwd, 'opts.cwd', RequestLimits.maxPathLength) } : {}),
    ...(v.user !== undefined ? { user: cText(v.user, 'opts.user', RequestLimits.maxUserLength) } : {}),
    ...(v.pty !== undefined ? { pty: terminalSize(v.pty, 'opts.pty') } : {}),
    ...(v.stdin !== undefined ? { stdin: bytes(v.stdin, 'opts.stdin') } : {}),
    ...(v.openStdin !== undefined ? { openStdin: flag(v.openStdin, 'opts.openStdin') } : {}),
    ...(v.env !== undefined ? { env: env(v.env, 'opts.env') } : {}),
    ...(v.timeoutMs !== undefined ? { timeoutMs: count(v.timeoutMs, 'opts.timeoutMs') } : {}),
    ...(v.maxOutputBytes !== undefined ? { maxOutputBytes: count(v.maxOutputBytes, 'opts.maxOutputBytes') } : {})
  }
}

const id = (r: Obj): string => text(r.id, 'id', RequestLimits.maxIdLength)
const tenantName = (v: unknown, field: string): string => text(v, field, RequestLimits.maxNameLength)

/**
 * A replay's spec: labels (laid over the recorded ones, as a spec's are checked) and a TTL, and
 * nothing else — the rest is the recorded spec, or it would not be a replay.
 */
function replaySpec (v: unknown): ReplaySpec {
  if (!isPlainObject(v)) invalid('spec', 'must be an object { labels?, ttlMs? }')
  for (const k of Object.keys(v)) if (k !== 'labels' && k !== 'ttlMs') invalid(`spec.${k.slice(0, 64)}`, 'cannot be given to a replay: only labels and ttlMs (the rest is the recorded spec)')
  const d = SpecDefaults
  const out: ReplaySpec = {}
  if (v.labels !== undefined) out.labels = stringMap(v.labels, 'spec.labels', { maxEntries: d.maxLabels, maxKey: d.maxLabelLength, maxValue: d.maxLabelLength }, invalid)
  if (v.ttlMs !== undefined) {
    if (positive(v.ttlMs, 'spec.ttlMs') > d.maxTtlMs) invalid('spec.ttlMs', `must be an integer from 1 to ${d.maxTtlMs}`)
    out.ttlMs = v.ttlMs as number
  }
  return out
}

const windowSec = upTo(CreationSeriesDefaults.windowSec)

function digest (v: unknown): string {
  if (!isDigest(v)) invalid('digest', 'must be a sha256:<64 hex> digest')
  return v as string
}

function blobLength (v: unknown): number {
  if (positive(v, 'length') > TrajectoryDefaults.maxBlobReadBytes) invalid('length', `must be an integer from 1 to ${TrajectoryDefaults.maxBlobReadBytes}`)
  return v as number
}

/** A kill names exactly one of `id`, `ids` (1 to maxKillIds of them) and `labels` (at least one). */
function kill (r: Obj): Extract<ClientRequest, { type: 'kill' }> {
  const given = (['id', 'ids', 'labels'] as const).filter((k) => r[k] !== undefined)
  if (given.length !== 1) invalid(given[1] ?? 'id', 'a kill names exactly one of id, ids and labels')
  if (r.id !== undefined) return { type: 'kill', id: id(r) }
  if (r.ids !== undefined) {
    const ids = r.ids
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > RequestLimits.maxKillIds) invalid('ids', `must be a list of 1 to ${RequestLimits.maxKillIds} sandbox ids`)
    return { type: 'kill', ids: ids.map((v, i) => text(v, `ids.${i}`, RequestLimits.maxIdLength)) }
  }
  const matched = labels(r.labels, 'labels')
  // An empty filter would match every sandbox the tenant has: too much to mean by accident.
  if (Object.keys(matched).length === 0) invalid('labels', 'must name at least one label')
  return { type: 'kill', labels: matched }
}
/** A key's life from now: 1 s to 10 years. */
function keyLife (v: unknown, field: string): number {
  const n = count(v, field)
  if (n < IamDefaults.minKeyLifeMs || n > IamDefaults.maxKeyLifeMs) invalid(field, `must be an integer from ${IamDefaults.minKeyLifeMs} (1 s) to ${IamDefaults.maxKeyLifeMs} (10 years)`)
  return n
}

/** A key id: the 12 characters after `wrn_` in a key. */
function keyIdField (v: unknown, field: string): string {
  if (typeof v !== 'string' || !/^[0-9a-z]{12}$/.test(v)) invalid(field, 'must be a key id: the 12 characters of [0-9a-z] after wrn_ in the key')
  return v
}

const listLimit = upTo(IamDefaults.maxListKeys)
const forkCount = upTo(RequestLimits.maxFork)

const execId = (r: Obj): string => text(r.execId, 'execId', RequestLimits.maxExecIdLength)
/** An optional field: checked when present, left out when not. */
function opt<K extends string, T> (r: Obj, key: K, check: (v: unknown, field: string) => T): { [P in K]?: T } {
  return (r[key] === undefined ? {} : { [key]: check(r[key], key) }) as { [P in K]?: T }
}

/**
 * One parser per request type: the whole request contract in one table. Each returns a fresh
 * request holding only the known fields, so nothing else a client put in travels further.
 */
const parsers: { [T in ClientRequest['type']]: (r: Obj) => Extract<ClientRequest, { type: T }> } = {
  create: (r) => ({ type: 'create', ...(r.spec !== undefined ? { spec: r.spec } : {}), ...opt(r, 'count', positive), ...opt(r, 'deadlineMs', count) }),
  info: (r) => ({ type: 'info', id: id(r) }),
  list: (r) => ({ type: 'list', ...opt(r, 'labels', labels), ...opt(r, 'state', (v, f) => oneOf(v, f, RECORD_STATES)), ...opt(r, 'all', flag), ...opt(r, 'limit', count), ...opt(r, 'tenant', tenantName) }),
  kill,
  'set-ttl': (r) => ({ type: 'set-ttl', id: id(r), ttlMs: positive(r.ttlMs, 'ttlMs') }),
  pause: (r) => ({ type: 'pause', id: id(r) }),
  resume: (r) => ({ type: 'resume', id: id(r) }),
  exec: (r) => ({ type: 'exec', id: id(r), execId: execId(r), argv: parseArgv(r.argv), ...(r.opts !== undefined ? { opts: execOptions(r.opts) } : {}) }),
  read: (r) => ({ type: 'read', id: id(r), execId: execId(r), fromSeq: count(r.fromSeq, 'fromSeq'), ...opt(r, 'maxBytes', count), ...opt(r, 'waitMs', count) }),
  'exec-kill': (r) => ({ type: 'exec-kill', id: id(r), execId: execId(r) }),
  'exec-resize': (r) => ({ type: 'exec-resize', id: id(r), execId: execId(r), cols: cells(r.cols, 'cols'), rows: cells(r.rows, 'rows') }),
  stdin: (r) => ({ type: 'stdin', id: id(r), execId: execId(r), offset: count(r.offset, 'offset'), ...opt(r, 'data', bytes), ...opt(r, 'eof', flag) }),
  trajectory: (r) => ({ type: 'trajectory', id: id(r), ...opt(r, 'fromSeq', count), ...opt(r, 'limit', positive), ...opt(r, 'tenant', tenantName) }),
  'trajectory-blob': (r) => ({ type: 'trajectory-blob', id: id(r), digest: digest(r.digest), offset: count(r.offset, 'offset'), length: blobLength(r.length), ...opt(r, 'tenant', tenantName) }),
  files: (r) => ({ type: 'files', id: id(r), req: parseFileRequest(r, { text, cText, count, flag, bytes, oneOf, invalid }, RequestLimits.maxPathLength) }),
  'token-create': (r) => {
    const scopes = r.scopes
    if (!Array.isArray(scopes) || scopes.length === 0 || !scopes.every(isScope)) invalid('scopes', 'must be a non-empty list of known scopes')
    return { type: 'token-create', tenant: text(r.tenant, 'tenant', RequestLimits.maxNameLength), scopes: [...new Set(scopes)], ...opt(r, 'expiresInMs', keyLife) }
  },
  'token-list': (r) => ({
    type: 'token-list', ...opt(r, 'tenant', (v, f) => text(v, f, RequestLimits.maxNameLength)), ...opt(r, 'after', keyIdField), ...opt(r, 'limit', listLimit)
  }),
  'token-revoke': (r) => ({ type: 'token-revoke', id: keyIdField(r.id, 'id') }),
  'admin-rotate': () => ({ type: 'admin-rotate' }),
  'tenant-list': () => ({ type: 'tenant-list' }),
  // The quotas' names and values are the IAM store's to check (it names `quotas.<name>`).
  'tenant-quotas': (r) => ({
    type: 'tenant-quotas', tenant: text(r.tenant, 'tenant', RequestLimits.maxNameLength),
    ...opt(r, 'quotas', (v, f) => { if (!isPlainObject(v)) invalid(f, 'must be an object'); return v as Partial<Quotas> })
  }),
  nodes: () => ({ type: 'nodes' }),
  'cluster-stats': (r) => ({ type: 'cluster-stats', ...opt(r, 'windowSec', windowSec) }),
  'image-tag': (r) => ({ type: 'image-tag', name: text(r.name, 'name', RequestLimits.maxNameLength), digest: text(r.digest, 'digest', RequestLimits.maxNameLength), kind: oneOf(r.kind, 'kind', LAYER_KINDS) }),
  'image-list': () => ({ type: 'image-list' }),
  snapshot: (r) => ({ type: 'snapshot', id: id(r), ...opt(r, 'name', (v) => checkImageName(v)), ...opt(r, 'memory', flag) }),
  snapshots: (r) => ({ type: 'snapshots', ...opt(r, 'sandboxId', (v, f) => text(v, f, RequestLimits.maxIdLength)), ...opt(r, 'limit', positive) }),
  'snapshot-delete': (r) => ({ type: 'snapshot-delete', id: text(r.id, 'id', RequestLimits.maxNameLength) }),
  fork: (r) => ({ type: 'fork', id: id(r), count: forkCount(r.count, 'count'), ...(r.spec !== undefined ? { spec: r.spec } : {}), ...opt(r, 'deadlineMs', count), ...opt(r, 'memory', flag) }),
  hibernate: (r) => ({ type: 'hibernate', id: id(r) }),
  replay: (r) => ({
    type: 'replay', id: id(r), ...opt(r, 'upTo', count), ...opt(r, 'compare', (v, f) => oneOf(v, f, REPLAY_COMPARE)), ...opt(r, 'spec', (v) => replaySpec(v))
  }),
  restore: (r) => ({ type: 'restore', id: id(r) }),
  'audit-query': (r) => ({
    type: 'audit-query',
    query: {
      ...opt(r, 'tenant', (v, f) => text(v, f, RequestLimits.maxNameLength)),
      ...opt(r, 'sandbox', (v, f) => text(v, f, RequestLimits.maxIdLength)),
      ...opt(r, 'action', (v, f) => text(v, f, 64)),
      ...opt(r, 'since', count),
      ...opt(r, 'until', count),
      ...opt(r, 'limit', upTo(AuditDefaults.maxQueryLimit))
    }
  })
}

const hasOwn = Object.prototype.hasOwnProperty

/**
 * Checks a request as it came off the wire.
 * @param input whatever the client sent
 * @returns a request with only its known, well-typed fields
 * @throws WARREN_ERR_INVALID_ARGUMENT with `details.field` naming the first bad field
 */
export function parseClientRequest (input: unknown): ClientRequest {
  if (!isPlainObject(input)) invalid('type', 'is missing: a request is an object with a type')
  const type = input.type
  if (typeof type !== 'string' || !hasOwn.call(parsers, type)) {
    invalid('type', `must be a known request type, not ${JSON.stringify(typeof type === 'string' ? type.slice(0, 40) : typeof type)}`)
  }
  return parsers[type as ClientRequest['type']](input)
}

/** True for the name of a request type the session knows (metrics label refused requests by it). */
export function isClientRequestType (type: unknown): type is ClientRequest['type'] {
  return typeof type === 'string' && hasOwn.call(parsers, type)
}
