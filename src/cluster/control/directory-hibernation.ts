/**
 * The directory's bookkeeping of hibernated sandboxes (records with no node, waiting for a
 * resume): which tenant has which, bounded per tenant since they hold no quota; and what live
 * and hibernated records use, which the snapshot collector must leave in the blob store.
 */
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxRecord } from './directory.js'

/** Sets of ids under a key (sandboxes by node, hibernated ones by tenant); an emptied set goes. */
export class IdSets {
  private readonly sets = new Map<string, Set<string>>()

  add (key: string, id: string): void {
    let set = this.sets.get(key)
    if (set === undefined) { set = new Set(); this.sets.set(key, set) }
    set.add(id)
  }

  delete (key: string, id: string): void {
    const set = this.sets.get(key)
    set?.delete(id)
    if (set?.size === 0) this.sets.delete(key)
  }

  /** The ids under `key` (a copy: the caller may change the sets as it goes). */
  of (key: string): string[] {
    return [...this.sets.get(key) ?? []]
  }

  size (key: string): number {
    return this.sets.get(key)?.size ?? 0
  }

  all (): string[] {
    return [...this.sets.values()].flatMap((s) => [...s])
  }
}

/** Hibernated sandbox ids by tenant. */
export class HibernatedSet {
  private readonly byTenant = new IdSets()

  /** @param maxPerTenant the most one tenant may have */
  constructor (private readonly maxPerTenant: number) {}

  /**
   * Checks that `r` may begin to hibernate (it is live, and its tenant has room).
   * @throws WARREN_ERR_NOT_FOUND for another tenant's, an ended or a hibernated one; QUOTA past the bound
   */
  admit (r: SandboxRecord | undefined, tenant: string, id: string, ended: boolean): SandboxRecord {
    if (r === undefined || r.tenant !== tenant || ended || r.state === 'hibernated') throw createError(ErrorCodes.NOT_FOUND, `no live sandbox ${id}`)
    if (this.byTenant.size(tenant) >= this.maxPerTenant) {
      throw createError(ErrorCodes.QUOTA, `tenant ${tenant} has ${this.maxPerTenant} hibernated sandboxes: resume or kill some first`, { quota: 'hibernated', max: this.maxPerTenant })
    }
    return r
  }

  add (r: SandboxRecord): void { this.byTenant.add(r.tenant, r.id) }
  delete (r: SandboxRecord): void { this.byTenant.delete(r.tenant, r.id) }
  /** Every hibernated id (a copy: the caller may end them as it goes). */
  ids (): string[] { return this.byTenant.all() }
}

/** The layers live and hibernated records stack, and the snapshots hibernated (or hibernating) ones resume from. */
export function usedBy (records: Iterable<SandboxRecord>, ended: (r: SandboxRecord) => boolean): { layers: string[], snapshots: string[] } {
  const layers = new Set<string>()
  const snapshots = new Set<string>()
  for (const r of records) {
    if (ended(r)) continue
    for (const l of r.req.layers) layers.add(l)
    if (r.snapshot !== undefined) snapshots.add(r.snapshot)
    if (r.hibernating !== undefined) snapshots.add(r.hibernating)
  }
  return { layers: [...layers], snapshots: [...snapshots] }
}
