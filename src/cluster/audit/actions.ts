/**
 * Which requests are audited, as which action, with which of their ids: one row per request
 * type. A type without a row (reads: info, list, read, trajectory, image-list…) is not audited.
 * A new request type that changes something adds its row here; nothing else changes.
 *
 * `fields` gets the parsed request and, once it succeeded, its result (undefined when refused);
 * it returns the ids and values to keep. What a record may hold is bounded (`AuditDefaults`):
 * an exec's argv capped, never stdin, output, file contents or a key.
 */
import { shownName, type WireName } from '../../file-names.js'
import type { ClientRequest } from '../control/requests.js'
import { AuditDefaults, type AuditRecord } from './types.js'

type Req<T extends ClientRequest['type']> = Extract<ClientRequest, { type: T }>
type Fields = Partial<AuditRecord>

export interface AuditRule<T extends ClientRequest['type'] = ClientRequest['type']> {
  /**
   * The action's name, or a function of the request (given the parsed request, or the raw one
   * when it was refused before it parsed) that returns undefined for requests not audited.
   */
  action: string | ((r: Record<string, unknown>) => string | undefined)
  fields?: (req: Req<T>, result: unknown) => Fields
}

const cut = (s: string): string => s.length > AuditDefaults.maxTextChars ? s.slice(0, AuditDefaults.maxTextChars) : s

/** An argv kept up to `maxArgvChars` characters in all. */
export function cappedArgv (argv: string[]): Fields {
  const out: string[] = []
  let left = AuditDefaults.maxArgvChars
  for (const a of argv) {
    if (left <= 0) return { argv: out, argvTruncated: true }
    out.push(a.length > left ? a.slice(0, left) : a)
    if (a.length > left) return { argv: out, argvTruncated: true }
    left -= a.length
  }
  return { argv: out }
}

/**
 * The ids of the sandboxes a result lists (views, kill outcomes, fork outcomes), capped, and
 * their count; outcomes that failed (`ok: false`: another tenant's id, no room) are counted in
 * `failed` and named nowhere, so the log never says a sandbox was touched that was not.
 */
function sandboxIds (items: unknown): Fields {
  if (!Array.isArray(items)) return {}
  const done = items.filter((o) => (o as { ok?: unknown } | null)?.ok !== false)
  const ids = done.map((o) => (o as { id?: unknown, sandbox?: { id?: unknown } } | null)?.sandbox?.id ?? (o as { id?: unknown } | null)?.id)
    .filter((id): id is string => typeof id === 'string')
  const failed = items.length - done.length
  return { sandboxes: ids.slice(0, AuditDefaults.maxIds), count: done.length, ...(failed > 0 ? { failed } : {}) }
}

const sandbox = (r: { id: string }): Fields => ({ sandbox: r.id })

/** The file ops that change a sandbox's files; reads and downloads are not audited. */
const FILE_ACTIONS: Record<string, string> = {
  'write-begin': 'file.write',
  'write-end': 'file.commit',
  'write-abort': 'file.abort',
  mkdir: 'file.mkdir',
  remove: 'file.remove',
  rename: 'file.rename'
}

export const AUDIT_ACTIONS: { [T in ClientRequest['type']]?: AuditRule<T> } = {
  create: {
    action: 'sandbox.create',
    fields: (r, result) => ({
      ...(Array.isArray(result) ? sandboxIds(result) : typeof (result as { id?: unknown } | undefined)?.id === 'string' ? { sandbox: (result as { id: string }).id } : {}),
      ...(result === undefined && r.count !== undefined ? { count: r.count } : {})
    })
  },
  kill: {
    action: 'sandbox.kill',
    fields: (r, result) => 'id' in r ? { sandbox: r.id } : result !== undefined ? sandboxIds(result) : 'ids' in r ? sandboxIds(r.ids.map((id) => ({ id }))) : {}
  },
  'set-ttl': { action: 'sandbox.set-ttl', fields: sandbox },
  pause: { action: 'sandbox.pause', fields: sandbox },
  resume: { action: 'sandbox.resume', fields: sandbox },
  hibernate: { action: 'sandbox.hibernate', fields: sandbox },
  exec: { action: 'exec', fields: (r) => ({ sandbox: r.id, exec: r.execId, ...cappedArgv(r.argv) }) },
  'exec-kill': { action: 'exec.kill', fields: (r) => ({ sandbox: r.id, exec: r.execId }) },
  files: {
    action: (r) => FILE_ACTIONS[String((r.req as { op?: unknown } | undefined)?.op ?? r.op)],
    fields: (r) => {
      // A path that is not UTF-8 arrives as bytes: the record shows them as \xHH.
      const q = r.req as { path?: WireName, to?: WireName, upload?: string }
      return { sandbox: r.id, ...(q.path !== undefined ? { path: cut(shownName(q.path)) } : {}), ...(q.to !== undefined ? { to: cut(shownName(q.to)) } : {}), ...(q.upload !== undefined ? { upload: q.upload } : {}) }
    }
  },
  snapshot: {
    action: 'snapshot.create',
    fields: (r, result) => ({ sandbox: r.id, ...(r.name !== undefined ? { name: r.name } : {}), ...(typeof (result as { id?: unknown } | undefined)?.id === 'string' ? { snapshot: (result as { id: string }).id } : {}) })
  },
  'snapshot-delete': { action: 'snapshot.delete', fields: (r) => ({ snapshot: cut(r.id) }) },
  fork: {
    action: 'sandbox.fork',
    fields: (r, result) => {
      const f = result as { snapshot?: { id?: unknown }, outcomes?: unknown } | undefined
      return { sandbox: r.id, count: r.count, ...(typeof f?.snapshot?.id === 'string' ? { snapshot: f.snapshot.id } : {}), ...(f?.outcomes !== undefined ? { sandboxes: sandboxIds(f.outcomes).sandboxes! } : {}) }
    }
  },
  replay: { action: 'sandbox.replay', fields: (r, result) => ({ sandbox: r.id, ...idOfView((result as { sandbox?: unknown } | undefined)?.sandbox) }) },
  restore: { action: 'sandbox.restore', fields: sandbox },
  'token-create': {
    action: 'token.create',
    fields: (r, result) => ({ target: r.tenant, scopes: r.scopes, ...(typeof result === 'string' ? newKeyId(result) : {}) })
  },
  'token-revoke': { action: 'token.revoke', fields: (r) => ({ revokedKeyId: r.id }) },
  // The new admin key's id (never the key); the old one is revoked with it.
  'admin-rotate': { action: 'token.rotate-admin', fields: (_r, result) => typeof result === 'string' ? newKeyId(result) : {} },
  // Reading a tenant's quotas is not a change; setting them is.
  'tenant-quotas': { action: (r) => r.quotas === undefined ? undefined : 'quota.set', fields: (r) => ({ target: r.tenant, ...(r.quotas !== undefined ? { quotas: r.quotas } : {}) }) },
  'image-tag': { action: 'image.tag', fields: (r) => ({ name: cut(r.name), digest: cut(r.digest) }) }
}

/** A replay's new sandbox, beside the one whose trajectory it replayed. */
function idOfView (view: unknown): Fields {
  const id = (view as { id?: unknown } | undefined)?.id
  return typeof id === 'string' ? { sandboxes: [id], count: 1 } : {}
}

/** The id of a key (`wrn_<id>_<secret>`); the secret never leaves this function. */
function newKeyId (key: string): Fields {
  const m = /^wrn_([0-9a-z]{1,32})_/.exec(key)
  return m === null ? {} : { newKeyId: m[1]! }
}

/**
 * The action a request is audited as, or undefined when it is not audited.
 * @param r the parsed request, or the raw one when it did not parse (`type` may be anything)
 */
export function auditAction (r: Record<string, unknown>): { action: string, rule: AuditRule } | undefined {
  const type = r.type
  if (typeof type !== 'string' || !Object.prototype.hasOwnProperty.call(AUDIT_ACTIONS, type)) return undefined
  const rule = AUDIT_ACTIONS[type as ClientRequest['type']] as AuditRule
  const action = typeof rule.action === 'string' ? rule.action : rule.action(r)
  return action === undefined ? undefined : { action, rule }
}
