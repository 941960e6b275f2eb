/**
 * The SDK's administration calls (an admin key's): API keys (issue with an expiry, list, revoke,
 * rotate the admin key) and tenants' quotas, as thin requests over the client's session.
 */
import type { ClientRequest, KeyView, Quotas, Scope } from '../cluster/index.js'

/** Sends one request to the session with the client's default time limit. */
export type Send = <R>(message: ClientRequest) => Promise<R>

export type { KeyView, Quotas }

export const AdminClientDefaults = {
  /** Keys asked for per `token-list` page (the control plane answers at most 1,000). */
  keysPerPage: 1000
}

/** Options of a new key. */
export interface TokenOptions {
  /** Its life from now in ms (1 s to 10 years); without it the key does not expire. */
  expiresInMs?: number
}

/** Issues a key for `tenant` (shown once). */
export async function createToken (send: Send, tenant: string, scopes: string[], opts: TokenOptions = {}): Promise<string> {
  return await send<string>({ type: 'token-create', tenant, scopes: scopes as Scope[], ...(opts.expiresInMs !== undefined ? { expiresInMs: opts.expiresInMs } : {}) })
}

/** Every key (of one tenant when given), in id order, a page at a time; never a secret or hash. */
export async function listTokens (send: Send, filter: { tenant?: string } = {}): Promise<KeyView[]> {
  const out: KeyView[] = []
  for (let after: string | undefined; ;) {
    const page = await send<KeyView[]>({
      type: 'token-list', limit: AdminClientDefaults.keysPerPage,
      ...(filter.tenant !== undefined ? { tenant: filter.tenant } : {}), ...(after !== undefined ? { after } : {})
    })
    out.push(...page)
    if (page.length < AdminClientDefaults.keysPerPage) return out
    after = page[page.length - 1]!.id
  }
}

/** Revokes a key by id; its open sessions are closed. */
export async function revokeToken (send: Send, id: string): Promise<{ id: string, revoked: true }> {
  return await send<{ id: string, revoked: true }>({ type: 'token-revoke', id })
}

/** A new admin key; the old one is revoked (a session opened with it is closed once this is answered). */
export async function rotateAdminKey (send: Send): Promise<string> {
  return await send<string>({ type: 'admin-rotate' })
}

/** Sets a tenant's quotas (those given; creating the tenant when new), applied to its next create. */
export async function setQuotas (send: Send, tenant: string, quotas: Partial<Quotas>): Promise<Quotas> {
  return await send<Quotas>({ type: 'tenant-quotas', tenant, quotas })
}
