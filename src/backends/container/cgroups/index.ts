/**
 * Cgroup limits for container sandboxes, on cgroup v1, v2 and hybrid hosts: the layout of this
 * host per controller, a group per sandbox with memory / CPU / pids limits, OOM and usage
 * figures, kill-all, removal, and reclaim of orphaned groups after a restart.
 */
export { CgroupDefaults } from './defaults.js'
export { describeLayout, detectLayout, layoutFrom, layoutMode, type TextReader } from './detect.js'
export { freezeGroup, freezerState, thawGroup, type Freezer, type FreezerState } from './freeze.js'
export { createSandboxCgroup, openSandboxCgroup } from './group.js'
export { planLimitWrites, toKernelLimits, type KernelLimits, type LimitWrite } from './limits.js'
export { createCgroupProvider, type CgroupProviderImpl } from './provider.js'
export { parseMountinfo, type MountEntry } from './mountinfo.js'
export { listSandboxCgroups, reclaimOrphans, removeParentGroups } from './reclaim.js'
export type {
  CgroupEvents, CgroupLayout, CgroupOptions, CgroupUsage, Controller, CreateCgroupOptions, KillOptions, LayoutKey,
  OomSource, Placement, SandboxCgroupHandle, SandboxLimits, V1Placement, V2Placement
} from './types.js'
