/**
 * What the container backend needs of cgroups: a group per sandbox (limits, OOM count, freezer,
 * removal) from a provider. The cgroups module (cgroups/) is the real provider; tests may pass
 * their own.
 */
import type { SandboxSpec } from '../types.js'

type Limits = NonNullable<SandboxSpec['limits']>

/** The groups of one sandbox. */
export interface SandboxCgroup {
  /** One directory per hierarchy; the launcher joins them. */
  dirs: string[]
  /** OOM kills inside the group so far. */
  oomKills (): Promise<number>
  /** Kills what is left in the group and removes it (thawing it after the kill when it is frozen). */
  remove (): Promise<void>
  /** Stops every process of the group until `thaw` (providers with `freezes`). Idempotent. */
  freeze? (): Promise<void>
  /** Lets a frozen group run on. Idempotent. */
  thaw? (): Promise<void>
  /** True while the group is frozen or freezing. */
  frozen? (): Promise<boolean>
}

/**
 * Puts a sandbox under resource limits; the cgroups module provides the real one. With a
 * provider every sandbox gets its group (limits or not), so any sandbox can be paused.
 */
export interface CgroupProvider {
  /** True when its groups can be frozen: the backend then offers pause, resume and snapshot. */
  readonly freezes?: boolean
  /** Creates the groups of one sandbox with its limits. */
  create (id: string, limits: Limits): Promise<SandboxCgroup>
  /** The groups of a sandbox made before (by a previous agent), if they exist. */
  open? (id: string): SandboxCgroup | undefined
  /** Reclaims groups of sandboxes that are no longer journaled. */
  reclaimOrphans? (keep: Set<string>): Promise<void>
  /** Removes the provider's own (empty) parent groups. */
  close? (): Promise<void>
}
