/**
 * IamStore: tenants, API keys and quotas. Keys are `wrn_<keyId>_<secret>`; only a sha256 of
 * the secret is kept (secrets are 256 random bits, so a fast hash is enough and login stays
 * cheap), compared in constant time. The store persists to one JSON file, written atomically.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { customAlphabet } from 'nanoid'
import { createError, ErrorCodes } from '../../errors.js'
import { createTokenBucket, type TokenBucket } from './token-bucket.js'

export const SCOPES = ['sandbox:create', 'sandbox:exec', 'sandbox:read', 'admin'] as const
export type Scope = typeof SCOPES[number]

export interface Quotas {
  /** Sandboxes alive at once. */
  maxSandboxes: number
  /** Sustained creations per second (token bucket rate). */
  createsPerSecond: number
  /** Creations allowed in one burst (token bucket size). */
  createBurst: number
}

export const QuotaDefaults: Quotas = { maxSandboxes: 100_000, createsPerSecond: 20_000, createBurst: 20_000 }

/** Who a request comes from, once its token checked out. */
export interface Principal {
  tenant: string
  keyId: string
  scopes: Scope[]
}

interface KeyRecord { tenant: string, scopes: Scope[], hash: string, createdAt: string }
interface TenantRecord { quotas: Quotas }
interface StoreFile { version: 1, joinTokenHash: string, tenants: Record<string, TenantRecord>, keys: Record<string, KeyRecord> }

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

/** @throws WARREN_ERR_FORBIDDEN unless the principal holds `scope` (or admin). */
export function authorize (principal: Principal, scope: Scope): void {
  if (principal.scopes.includes(scope) || principal.scopes.includes('admin')) return
  throw createError(ErrorCodes.FORBIDDEN, `this key lacks the scope ${scope}`, { scope })
}

export class IamStore {
  private data: StoreFile
  private readonly buckets = new Map<string, TokenBucket>()
  private readonly live = new Map<string, number>()

  /** @param file where the store persists; undefined keeps it in memory (tests, simulation). */
  constructor (private readonly file?: string) {
    this.data = { version: 1, joinTokenHash: '', tenants: {}, keys: {} }
    if (file !== undefined) {
      try {
        this.data = JSON.parse(readFileSync(file, 'utf8')) as StoreFile
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
      }
    }
  }

  /** Creates (or updates the quotas of) a tenant; returns its quotas now. */
  upsertTenant (tenant: string, quotas: Partial<Quotas> = {}): Quotas {
    if (!/^[a-zA-Z0-9_.-]{1,64}$/.test(tenant)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'tenant names are 1-64 of [a-zA-Z0-9_.-]')
    const prev = this.data.tenants[tenant]?.quotas ?? QuotaDefaults
    this.data.tenants[tenant] = { quotas: { ...prev, ...quotas } }
    this.buckets.delete(tenant)
    this.save()
    return this.data.tenants[tenant]!.quotas
  }

  /** @throws WARREN_ERR_NOT_FOUND (field `tenant`) when there is no such tenant */
  quotasOf (tenant: string): Quotas {
    const t = Object.hasOwn(this.data.tenants, tenant) ? this.data.tenants[tenant] : undefined
    if (t === undefined) throw createError(ErrorCodes.NOT_FOUND, `no tenant ${tenant}`, { field: 'tenant' })
    return t.quotas
  }

  /** Every tenant and its quotas. */
  tenants (): Array<{ tenant: string, quotas: Quotas }> {
    return Object.entries(this.data.tenants).map(([tenant, t]) => ({ tenant, quotas: t.quotas }))
  }

  /** Issues a new API key; the returned token is shown once and never stored. */
  createKey (tenant: string, scopes: Scope[]): string {
    if (this.data.tenants[tenant] === undefined) this.upsertTenant(tenant)
    for (const s of scopes) if (!isScope(s)) throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown scope ${String(s)}`)
    const id = keyId()
    const secret = randomBytes(32).toString('base64url')
    this.data.keys[id] = { tenant, scopes: [...new Set(scopes)], hash: sha256(secret), createdAt: new Date().toISOString() }
    this.save()
    return `wrn_${id}_${secret}`
  }

  /** Revokes a key; returns false when there was none. */
  revokeKey (id: string): boolean {
    if (this.data.keys[id] === undefined) return false
    delete this.data.keys[id]
    this.save()
    return true
  }

  /** The principal behind a token, or undefined when it is not a live key. */
  authenticate (token: unknown): Principal | undefined {
    if (typeof token !== 'string') return undefined
    const m = /^wrn_([0-9a-z]{12})_([A-Za-z0-9_-]{43})$/.exec(token)
    if (m === null) return undefined
    const record = this.data.keys[m[1]!]
    if (record === undefined || !sameHash(sha256(m[2]!), record.hash)) return undefined
    return { tenant: record.tenant, keyId: m[1]!, scopes: record.scopes }
  }

  /** Sets a new node join token (returned once) and forgets the old one. */
  rotateJoinToken (): string {
    const token = `wrnj_${randomBytes(32).toString('base64url')}`
    this.data.joinTokenHash = sha256(token)
    this.save()
    return token
  }

  /** True when `token` is the node join token. */
  checkJoinToken (token: unknown): boolean {
    return typeof token === 'string' && this.data.joinTokenHash !== '' && sameHash(sha256(token), this.data.joinTokenHash)
  }

  /**
   * Admits `n` creations for a tenant against its quotas and counts them as live.
   * @throws WARREN_ERR_QUOTA with `details.quota` ('concurrent' | 'rate') and, for rate, `retryAfterMs`
   */
  admitCreate (tenant: string, n = 1): void {
    const quotas = this.data.tenants[tenant]?.quotas ?? QuotaDefaults
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

  private save (): void {
    if (this.file === undefined) return
    mkdirSync(dirname(this.file), { recursive: true })
    const tmp = `${this.file}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(this.data, null, 2), { mode: 0o600 })
    renameSync(tmp, this.file)
  }
}
