/**
 * The cgroups module as the container backend's `CgroupProvider`: one parent group per node
 * (e.g. `warren-<nodeId>`), sandbox groups named by sandbox id below it.
 */
import { existsSync } from 'node:fs'
import type { CgroupProvider } from '../cgroup-types.js'
import { CgroupDefaults } from './defaults.js'
import { detectLayout } from './detect.js'
import { createSandboxCgroup, openSandboxCgroup } from './group.js'
import { reclaimOrphans, removeParentGroups } from './reclaim.js'
import type { CgroupLayout, SandboxCgroupHandle, SandboxLimits } from './types.js'

/** A `CgroupProvider` whose groups are full `SandboxCgroupHandle`s. */
export interface CgroupProviderImpl extends CgroupProvider {
  create (id: string, limits: SandboxLimits): Promise<SandboxCgroupHandle>
  open (id: string): SandboxCgroupHandle | undefined
  reclaimOrphans (keep: Set<string>): Promise<void>
  close (): Promise<void>
  readonly freezes: boolean
}

/**
 * A provider that puts each sandbox in `<mount>/<parent>/<id>` in every hierarchy it needs.
 * @param parent this node's parent group; give each node on a host its own, since
 *   `reclaimOrphans` removes every group under it that is not kept
 * @param opts.oomGroup v2 memory.oom.group (default `CgroupDefaults.oomGroup`): true ends every
 *   process of the sandbox on an OOM (the agent, shielded at oom_score_adj -1000, survives);
 *   false kills only the victim, so background processes outlive another command's OOM
 */
export function createCgroupProvider (parent: string = CgroupDefaults.parent, opts: { layout?: CgroupLayout, oomGroup?: boolean } = {}): CgroupProviderImpl {
  const base = { parent, ...(opts.layout !== undefined ? { layout: opts.layout } : {}) }
  const oomGroup = opts.oomGroup ?? CgroupDefaults.oomGroup
  return {
    freezes: (opts.layout ?? detectLayout()).freezer !== undefined,
    create: async (id, limits) => await createSandboxCgroup(id, limits, { ...base, oomGroup }),
    open (id) {
      const group = openSandboxCgroup(id, base)
      return group.dirs.some((d) => existsSync(d)) ? group : undefined
    },
    async reclaimOrphans (keep) { await reclaimOrphans('', keep, base) },
    async close () { await removeParentGroups(base) }
  }
}
