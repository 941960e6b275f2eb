/**
 * The iam actor: the one owner of the IamStore, so quota counts have a single writer.
 */
import { Actor } from '../../actors/index.js'
import { AdminKeys, type AdminKey, type EnsureOptions } from './admin-key.js'
import type { Quotas } from './quotas.js'
import type { IamStore, Principal, Scope } from './store.js'

export type IamMessage =
  | { type: 'authenticate', token: unknown }
  | { type: 'admit', tenant: string, n: number }
  | { type: 'release', tenant: string, n?: number }
  | { type: 'adopt', tenant: string }
  | { type: 'create-key', tenant: string, scopes: Scope[], expiresInMs?: number }
  | { type: 'list-keys', tenant?: string, after?: string, limit?: number }
  /** Answers true when the key was there (and is gone now), false when there was none. */
  | { type: 'revoke-key', keyId: string }
  /** A new admin key (answered); the old one is revoked. */
  | { type: 'rotate-admin' }
  /** The admin key as `warren up` prints it: kept, made, or (`rotate`) made anew. */
  | ({ type: 'admin-key' } & EnsureOptions)
  | { type: 'set-quotas', tenant: string, quotas: Partial<Quotas> }
  | { type: 'get-quotas', tenant: string }
  | { type: 'list-tenants' }
  | { type: 'check-join', token: unknown }

export interface IamOptions {
  /** Told the ids of keys revoked, so the sessions they opened are closed. */
  keysEnded?: (keyIds: string[]) => void
  /** Told a tenant's quotas once an admin changed them, so the gateway applies its request rate. */
  quotasChanged?: (tenant: string, quotas: Quotas) => void
}

export class Iam extends Actor<IamMessage> {
  constructor (private readonly store: IamStore, private readonly admin: AdminKeys, private readonly o: IamOptions) { super() }

  receive (m: IamMessage): unknown {
    switch (m.type) {
      case 'authenticate': return this.store.authenticate(m.token) ?? null
      case 'admit': this.store.admitCreate(m.tenant, m.n); return true
      case 'release': this.store.release(m.tenant, m.n ?? 1); return undefined
      case 'adopt': this.store.countAdopted(m.tenant); return undefined
      case 'create-key': return this.store.createKey(m.tenant, m.scopes, m.expiresInMs !== undefined ? { expiresInMs: m.expiresInMs } : {})
      case 'list-keys': return this.store.listKeys(m)
      case 'revoke-key': {
        const revoked = this.store.revokeKey(m.keyId)
        if (revoked) this.ended([m.keyId])
        return revoked
      }
      case 'rotate-admin': {
        const { token, ended } = this.admin.rotate()
        this.ended(ended)
        return token
      }
      case 'admin-key': {
        const key: AdminKey = this.admin.ensure(m)
        this.ended(key.ended)
        return key
      }
      case 'set-quotas': {
        const quotas = this.store.upsertTenant(m.tenant, m.quotas)
        this.o.quotasChanged?.(m.tenant, quotas)
        return quotas
      }
      case 'get-quotas': return this.store.quotasOf(m.tenant)
      case 'list-tenants': return this.store.tenants()
      case 'check-join': return this.store.checkJoinToken(m.token)
    }
  }

  private ended (keyIds: string[]): void {
    if (keyIds.length > 0) this.o.keysEnded?.(keyIds)
  }
}

export function createIam (store: IamStore, options: IamOptions = {}): () => Iam {
  // Outlives a restart of the actor: the admin key this process knows is remembered here.
  const admin = new AdminKeys(store)
  return () => new Iam(store, admin, options)
}

export type { Principal }
