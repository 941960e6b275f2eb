/**
 * IamStore: tenants, API keys and quotas, kept in the control plane's state database. Keys are
 * `wrn_<keyId>_<secret>`; only a sha256 of the secret is kept (secrets are 256 random bits, so a
 * fast hash is enough and login stays cheap), compared in constant time. Every change is checked
 * whole first and then written in one transaction: a refused request changes nothing, and an
 * acknowledged one is on disk (see src/state).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { customAlphabet } from 'nanoid'
import { createError, ErrorCodes } from '../../errors.js'
import { checkName, type Db, type Warn } from '../../state/index.js'
import { parseLegacyIam } from './legacy.js'
import { checkQuotas, QuotaDefaults, RATE_BURSTS, type Quotas } from './quotas.js'
import { createTokenBucket, type TokenBucket } from '../../transport/index.js'

/** `image:push` lets a key push layers to the blob store (not tag them: names are the cluster's, admin's). */
export const SCOPES = ['sandbox:create', 'sandbox:exec', 'sandbox:read', 'image:push', 'admin'] as const
export type Scope = typeof SCOPES[number]

/** Who a request comes from, once its token checked out. */
export interface Principal {
  tenant: string
  keyId: string
  scopes: Scope[]
  /** When the key stops working (ms since the epoch); absent: never. Its sessions are closed then. */
  expiresAt?: number
}

/** A key as `token ls` shows it: never its secret nor its hash. Times are ms since the epoch. */
export interface KeyView {
  id: string
  tenant: string
  scopes: Scope[]
  createdAt: number
  expiresAt?: number
  /** When it last authenticated, to within `IamDefaults.lastUsedResolutionMs`. */
  lastUsedAt?: number
  /** The cluster's admin key (`warren up` prints it; rotated, not revoked). */
  admin?: true
}

export const IamDefaults = {
  /** Longest life a key may be given (10 years), and the shortest (1 s). */
  maxKeyLifeMs: 3650 * 86_400_000,
  minKeyLifeMs: 1000,
  /** A key's last use is written when the stored one is older than this: an hour, so logins cost no disk write. */
  lastUsedResolutionMs: 3_600_000,
  /** Keys one `token-list` answer holds at most (the reply stays well under a frame). */
  maxListKeys: 1000
}

const TENANT = /^[a-z0-9][a-z0-9._-]{0,62}$/i
const TENANT_RULE = '1-63 of [A-Za-z0-9._-], starting with a letter or digit'
const JOIN_TOKEN_SETTING = 'join_token_hash'
const ADMIN_KEY_SETTING = 'admin_key_id'
const KEY_ID = /^[0-9a-z]{12}$/

const keyId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 12)
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex')

function sameHash (a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex')
  const y = Buffer.from(b, 'hex')
  return x.length === y.length && timingSafeEqual(x, y)
}

export function isScope (s: unknown): s is Scope {
  return typeof s === 'string' && (SCOPES as readonly string[]).includes(s)
}

/**
 * A tenant name as clients may give it.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `tenant` for a malformed or reserved name
 */
export function checkTenant (tenant: unknown): string {
  return checkName(tenant, 'tenant', TENANT, TENANT_RULE)
}

function checkScopes (scopes: unknown): Scope[] {
  if (!Array.isArray(scopes) || scopes.length === 0 || scopes.length > SCOPES.length * 4) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `scopes is a non-empty list of ${SCOPES.join(', ')}`, { field: 'scopes' })
  }
  for (const s of scopes) if (!isScope(s)) throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown scope ${String(s).slice(0, 40)}`, { field: 'scopes' })
  return [...new Set(scopes as Scope[])]
}

/** A whole API key: `wrn_`, a 12-character id, `_`, a 43-character secret (256 bits, base64url). */
const TOKEN = /^wrn_([0-9a-z]{12})_([A-Za-z0-9_-]{43})$/

/** The key id of a token (or of anything that starts like one: `wrn_<keyId>_…`), else undefined. */
export function keyIdOf (token: unknown): string | undefined {
  return typeof token === 'string' ? /^wrn_([0-9a-z]{12})_/.exec(token)?.[1] : undefined
}

/** True for a string shaped as an API key (whether or not such a key exists). */
export function isTokenShaped (token: unknown): token is string {
  return typeof token === 'string' && TOKEN.test(token)
}

/** A fresh API key, `wrn_<keyId>_<secret>`, not yet stored (see `IamStore.createKey`). */
export function newToken (): string {
  return `wrn_${keyId()}_${randomBytes(32).toString('base64url')}`
}

/** @throws WARREN_ERR_FORBIDDEN unless the principal holds `scope` (or admin). */
export function authorize (principal: Principal, scope: Scope): void {
  if (principal.scopes.includes(scope) || principal.scopes.includes('admin')) return
  throw createError(ErrorCodes.FORBIDDEN, `this key lacks the scope ${scope}`, { scope })
}

interface KeyRow { id: string, tenant: string, scopes: string, created_at: string, expires_at: number | null, last_used_at: number | null }
interface TenantRow { name: string, max_sandboxes: number, creates_per_second: number, create_burst: number, requests_per_second: number, request_burst: number, trajectory_bytes: number }
const quotasOfRow = (r: TenantRow): Quotas => ({
  maxSandboxes: r.max_sandboxes, createsPerSecond: r.creates_per_second, createBurst: r.create_burst, requestsPerSecond: r.requests_per_second, requestBurst: r.request_burst,
  trajectoryBytes: r.trajectory_bytes
})
/** A tenant row's values, in the table's column order. */
type TenantValues = [string, number, number, number, number, number, number]
const tenantValues = (name: string, q: Quotas): TenantValues => [name, q.maxSandboxes, q.createsPerSecond, q.createBurst, q.requestsPerSecond, q.requestBurst, q.trajectoryBytes]

/** The SQL the store runs, prepared once. */
function statements (db: Db) {
  return {
    tenant: db.prepare<[string], TenantRow>('SELECT * FROM tenants WHERE name = ?'),
    tenants: db.prepare<[], TenantRow>('SELECT * FROM tenants ORDER BY name'),
    putTenant: db.prepare<TenantValues>(`INSERT INTO tenants VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET
      max_sandboxes = excluded.max_sandboxes, creates_per_second = excluded.creates_per_second, create_burst = excluded.create_burst,
      requests_per_second = excluded.requests_per_second, request_burst = excluded.request_burst, trajectory_bytes = excluded.trajectory_bytes`),
    addTenant: db.prepare<TenantValues>('INSERT OR IGNORE INTO tenants VALUES (?, ?, ?, ?, ?, ?, ?)'),
    key: db.prepare<[string], { tenant: string, scopes: string, hash: string, expires_at: number | null, last_used_at: number | null }>(
      'SELECT tenant, scopes, hash, expires_at, last_used_at FROM api_keys WHERE id = ?'),
    addKey: db.prepare<[string, string, string, string, string, number | null]>('INSERT OR IGNORE INTO api_keys (id, tenant, scopes, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)'),
    keys: db.prepare<[{ after: string, tenant: string | null, limit: number }], KeyRow>(`SELECT id, tenant, scopes, created_at, expires_at, last_used_at
      FROM api_keys WHERE id > @after AND (@tenant IS NULL OR tenant = @tenant) ORDER BY id LIMIT @limit`),
    touchKey: db.prepare<[number, string]>('UPDATE api_keys SET last_used_at = ? WHERE id = ?'),
    deleteKey: db.prepare<[string]>('DELETE FROM api_keys WHERE id = ?'),
    setting: db.prepare<[string], { value: string }>('SELECT value FROM settings WHERE key = ?'),
    putSetting: db.prepare<[string, string]>('INSERT INTO settings VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value')
  }
}

export class IamStore {
  private readonly sql: ReturnType<typeof statements>
  private readonly buckets = new Map<string, TokenBucket>()
  private readonly live = new Map<string, number>()
  /** Quotas of the tenants that created, read once each (changes drop the entry), so admission reads no disk. */
  private readonly quotaCache = new Map<string, Quotas>()
  private joinTokenHash: string

  /**
   * @param db the state database (src/state), opened and migrated
   * @param now the clock keys expire by (ms since the epoch); tests inject their own
   */
  constructor (private readonly db: Db, private readonly now: () => number = Date.now) {
    this.sql = statements(db)
    this.joinTokenHash = this.sql.setting.get(JOIN_TOKEN_SETTING)?.value ?? ''
  }

  /**
   * Creates (or updates the quotas of) a tenant; returns its quotas now.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `tenant` or `quotas.<name>`; nothing is written then
   */
  upsertTenant (tenant: string, quotas: Partial<Quotas> = {}): Quotas {
    checkTenant(tenant)
    const change = checkQuotas(quotas)
    const next = this.db.transaction(() => {
      const row = this.sql.tenant.get(tenant)
      const q: Quotas = { ...(row !== undefined ? quotasOfRow(row) : QuotaDefaults), ...change }
      // A rate given alone brings its burst with it (one second's worth, at least 1): keeping the
      // default burst of 20,000 would let a tenant limited to 5 a second create 20,000 at once.
      for (const [rate, burst] of RATE_BURSTS) if (change[rate] !== undefined && change[burst] === undefined) q[burst] = Math.max(1, change[rate])
      this.sql.putTenant.run(...tenantValues(tenant, q))
      return q
    })()
    this.quotaCache.delete(tenant)
    this.buckets.delete(tenant)
    return next
  }

  /** @throws WARREN_ERR_NOT_FOUND (field `tenant`) when there is no such tenant */
  quotasOf (tenant: string): Quotas {
    const row = typeof tenant === 'string' ? this.sql.tenant.get(tenant) : undefined
    if (row === undefined) throw createError(ErrorCodes.NOT_FOUND, `no tenant ${String(tenant)}`, { field: 'tenant' })
    return quotasOfRow(row)
  }

  /** Every tenant and its quotas, by name. */
  tenants (): Array<{ tenant: string, quotas: Quotas }> {
    return this.sql.tenants.all().map((r) => ({ tenant: r.name, quotas: quotasOfRow(r) }))
  }

  /**
   * Issues a new API key, creating the tenant (default quotas) when it is new. The returned token
   * is shown once and never stored.
   * @param opts.expiresInMs the key's life from now (IamDefaults bounds); absent: it never expires
   * @param opts.token a token `newToken` made (the admin key, written to its file first)
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `tenant`, `scopes` or `expiresInMs`; nothing is written then
   */
  createKey (tenant: string, scopes: Scope[], opts: { expiresInMs?: number, token?: string } = {}): string {
    checkTenant(tenant)
    const granted = checkScopes(scopes)
    const life = opts.expiresInMs
    if (life !== undefined && (!Number.isSafeInteger(life) || life < IamDefaults.minKeyLifeMs || life > IamDefaults.maxKeyLifeMs)) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `expiresInMs must be an integer from ${IamDefaults.minKeyLifeMs} (1 s) to ${IamDefaults.maxKeyLifeMs} (10 years)`, { field: 'expiresInMs' })
    }
    const token = opts.token ?? newToken()
    const [, id, secret] = TOKEN.exec(token)!
    this.db.transaction(() => {
      this.sql.addTenant.run(...tenantValues(tenant, QuotaDefaults))
      this.sql.addKey.run(id!, tenant, JSON.stringify(granted), sha256(secret!), new Date(this.now()).toISOString(), life !== undefined ? this.now() + life : null)
    })()
    return token
  }

  /**
   * Revokes a key; returns false when there was none. The admin key is not revoked but rotated
   * (its holder would be locked out of the cluster).
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `id` for the cluster's admin key
   */
  revokeKey (id: string): boolean {
    if (typeof id !== 'string' || !KEY_ID.test(id)) return false
    if (id === this.adminKeyId()) throw createError(ErrorCodes.INVALID_ARGUMENT, `key ${id} is the cluster's admin key: rotate it (warren token rotate-admin) instead`, { field: 'id' })
    return this.sql.deleteKey.run(id).changes > 0
  }

  /**
   * Keys in id order, after `after`, of one tenant when given; never their secrets or hashes.
   * @param limit at most IamDefaults.maxListKeys
   */
  listKeys (opts: { tenant?: string, after?: string, limit?: number } = {}): KeyView[] {
    const admin = this.adminKeyId()
    const limit = Math.min(Math.max(1, opts.limit ?? IamDefaults.maxListKeys), IamDefaults.maxListKeys)
    return this.sql.keys.all({ after: opts.after ?? '', tenant: opts.tenant ?? null, limit }).map((r) => ({
      id: r.id, tenant: r.tenant, scopes: JSON.parse(r.scopes) as Scope[], createdAt: Date.parse(r.created_at),
      ...(r.expires_at !== null ? { expiresAt: r.expires_at } : {}),
      ...(r.last_used_at !== null ? { lastUsedAt: r.last_used_at } : {}),
      ...(r.id === admin ? { admin: true as const } : {})
    }))
  }

  /** The principal behind a token, or undefined when it is not a live key (unknown, revoked or expired). */
  authenticate (token: unknown): Principal | undefined {
    if (typeof token !== 'string') return undefined
    const m = TOKEN.exec(token)
    if (m === null) return undefined
    const record = this.sql.key.get(m[1]!)
    if (record === undefined || !sameHash(sha256(m[2]!), record.hash)) return undefined
    const now = this.now()
    if (record.expires_at !== null && record.expires_at <= now) return undefined
    // Written sparingly: once an hour a key is enough to tell a key in use from a forgotten one.
    if (record.last_used_at === null || now - record.last_used_at >= IamDefaults.lastUsedResolutionMs) this.sql.touchKey.run(now, m[1]!)
    return { tenant: record.tenant, keyId: m[1]!, scopes: JSON.parse(record.scopes) as Scope[], ...(record.expires_at !== null ? { expiresAt: record.expires_at } : {}) }
  }

  /** True when a key (live or expired, not revoked) has this id. */
  hasKey (keyId: string): boolean {
    return this.sql.key.get(keyId) !== undefined
  }

  /** The id of the cluster's admin key (see admin-key.ts), or undefined before one was made. */
  adminKeyId (): string | undefined {
    return this.sql.setting.get(ADMIN_KEY_SETTING)?.value
  }

  /**
   * Makes `token` (from `newToken`) the admin key, tenant `admin` with scope admin, and revokes
   * the one before it, in one transaction.
   * @returns the id of the key it replaced, if any
   */
  replaceAdminKey (token: string): string | undefined {
    return this.db.transaction(() => {
      const old = this.adminKeyId()
      this.createKey('admin', ['admin'], { token })
      this.sql.putSetting.run(ADMIN_KEY_SETTING, keyIdOf(token)!)
      if (old !== undefined) this.sql.deleteKey.run(old)
      return old
    })()
  }

  /** Sets a new node join token (returned once; `given`: the operator's, from a secret) and forgets the old one. */
  rotateJoinToken (given?: string): string {
    const token = given ?? `wrnj_${randomBytes(32).toString('base64url')}`
    const hash = sha256(token)
    this.sql.putSetting.run(JOIN_TOKEN_SETTING, hash)
    this.joinTokenHash = hash
    return token
  }

  /** True when `token` is the node join token. */
  checkJoinToken (token: unknown): boolean {
    return typeof token === 'string' && this.joinTokenHash !== '' && sameHash(sha256(token), this.joinTokenHash)
  }

  /**
   * Admits `n` creations for a tenant against its quotas and counts them as live.
   * @throws WARREN_ERR_QUOTA with `details.quota` ('concurrent' | 'rate') and, for rate, `retryAfterMs`
   */
  admitCreate (tenant: string, n = 1): void {
    const quotas = this.quotasFor(tenant)
    const live = this.live.get(tenant) ?? 0
    if (live + n > quotas.maxSandboxes) {
      throw createError(ErrorCodes.QUOTA, `tenant ${tenant} may run ${quotas.maxSandboxes} sandboxes at once`, { quota: 'concurrent', limit: quotas.maxSandboxes })
    }
    let bucket = this.buckets.get(tenant)
    if (bucket === undefined) {
      bucket = createTokenBucket(quotas.createsPerSecond, quotas.createBurst)
      this.buckets.set(tenant, bucket)
    }
    const wait = bucket.take(n)
    if (wait > 0) {
      throw createError(ErrorCodes.QUOTA, `tenant ${tenant} may create ${quotas.createsPerSecond} sandboxes a second`, { quota: 'rate', retryAfterMs: wait })
    }
    this.live.set(tenant, live + n)
  }

  /** A sandbox that outlived a restart counts again, whatever the quotas say: it already exists. */
  countAdopted (tenant: string): void {
    this.live.set(tenant, (this.live.get(tenant) ?? 0) + 1)
  }

  /** A tenant's sandbox ended (or its creation failed): it no longer counts. */
  release (tenant: string, n = 1): void {
    this.live.set(tenant, Math.max(0, (this.live.get(tenant) ?? 0) - n))
  }

  /** Sandboxes the tenant has alive. */
  liveCount (tenant: string): number { return this.live.get(tenant) ?? 0 }

  /**
   * Imports the iam.json of an earlier version (tenants, quotas, key hashes); entries already
   * here are kept as they are. Runs inside the caller's transaction (src/state importLegacy).
   */
  importLegacy (data: unknown, warn: Warn): void {
    const legacy = parseLegacyIam(data, (name) => { try { checkTenant(name); return true } catch { return false } }, isScope, warn)
    for (const [name, q] of legacy.tenants) this.sql.addTenant.run(...tenantValues(name, q))
    for (const k of legacy.keys) this.sql.addKey.run(k.id, k.tenant, JSON.stringify([...new Set(k.scopes)]), k.hash, k.createdAt, null)
  }

  /** A tenant's quotas as admission reads them: read once and kept until they change (an unknown tenant's: the defaults). */
  quotasFor (tenant: string): Quotas {
    let q = this.quotaCache.get(tenant)
    if (q === undefined) {
      const row = this.sql.tenant.get(tenant)
      q = row !== undefined ? quotasOfRow(row) : QuotaDefaults
      this.quotaCache.set(tenant, q)
    }
    return q
  }
}
