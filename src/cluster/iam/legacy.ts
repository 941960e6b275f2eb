/**
 * Reads the iam.json of earlier versions into records the store can insert. Entries that the
 * store would refuse today (a reserved or malformed tenant name, an unknown scope, a hash of the
 * wrong shape) are left out with a warning rather than failing the upgrade.
 */
import type { Warn } from '../../state/index.js'
import { checkQuotas, QuotaDefaults, type Quotas } from './quotas.js'

export interface LegacyKey { id: string, tenant: string, scopes: string[], hash: string, createdAt: string }
export interface LegacyIam { tenants: Map<string, Quotas>, keys: LegacyKey[] }

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * @param validTenant true when a name is one the store accepts
 * @param validScope true for a known scope
 */
export function parseLegacyIam (data: unknown, validTenant: (name: string) => boolean, validScope: (s: unknown) => boolean, warn: Warn): LegacyIam {
  const out: LegacyIam = { tenants: new Map(), keys: [] }
  if (!isRecord(data)) { warn('iam.json holds no object; nothing imported'); return out }
  const tenants = isRecord(data.tenants) ? data.tenants : {}
  for (const [name, record] of Object.entries(tenants)) {
    if (!validTenant(name)) { warn(`iam.json: tenant ${JSON.stringify(name)} is not a valid name today; it and its keys are not imported`); continue }
    let quotas = QuotaDefaults
    try {
      quotas = { ...QuotaDefaults, ...checkQuotas(isRecord(record) ? record.quotas : undefined) }
    } catch {
      warn(`iam.json: tenant ${name} has unreadable quotas; it gets the defaults`)
    }
    out.tenants.set(name, quotas)
  }
  const keys = isRecord(data.keys) ? data.keys : {}
  for (const [id, record] of Object.entries(keys)) {
    const ok = /^[0-9a-z]{12}$/.test(id) && isRecord(record) && typeof record.tenant === 'string' && out.tenants.has(record.tenant) &&
      typeof record.hash === 'string' && /^[0-9a-f]{64}$/.test(record.hash) && Array.isArray(record.scopes) && record.scopes.every(validScope)
    if (!ok) { warn(`iam.json: key ${JSON.stringify(id)} is malformed or of a tenant not imported; it is not imported`); continue }
    const r = record as { tenant: string, hash: string, scopes: string[], createdAt?: unknown }
    out.keys.push({ id, tenant: r.tenant, scopes: r.scopes, hash: r.hash, createdAt: typeof r.createdAt === 'string' ? r.createdAt : new Date().toISOString() })
  }
  return out
}
