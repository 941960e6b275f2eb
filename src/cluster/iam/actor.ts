/**
 * The iam actor: the one owner of the IamStore, so quota counts have a single writer.
 */
import { Actor } from '../../actors/index.js'
import type { Quotas } from './quotas.js'
import type { IamStore, Principal, Scope } from './store.js'

export type IamMessage =
  | { type: 'authenticate', token: unknown }
  | { type: 'admit', tenant: string, n: number }
  | { type: 'release', tenant: string, n?: number }
  | { type: 'adopt', tenant: string }
  | { type: 'create-key', tenant: string, scopes: Scope[] }
  | { type: 'revoke-key', keyId: string }
  | { type: 'set-quotas', tenant: string, quotas: Partial<Quotas> }
  | { type: 'get-quotas', tenant: string }
  | { type: 'list-tenants' }
  | { type: 'check-join', token: unknown }

export class Iam extends Actor<IamMessage> {
  constructor (private readonly store: IamStore) { super() }

  receive (m: IamMessage): unknown {
    switch (m.type) {
      case 'authenticate': return this.store.authenticate(m.token) ?? null
      case 'admit': this.store.admitCreate(m.tenant, m.n); return true
      case 'release': this.store.release(m.tenant, m.n ?? 1); return undefined
      case 'adopt': this.store.countAdopted(m.tenant); return undefined
      case 'create-key': return this.store.createKey(m.tenant, m.scopes)
      case 'revoke-key': return this.store.revokeKey(m.keyId)
      case 'set-quotas': return this.store.upsertTenant(m.tenant, m.quotas)
      case 'get-quotas': return this.store.quotasOf(m.tenant)
      case 'list-tenants': return this.store.tenants()
      case 'check-join': return this.store.checkJoinToken(m.token)
    }
  }
}

export function createIam (store: IamStore): () => Iam {
  return () => new Iam(store)
}

export type { Principal }
