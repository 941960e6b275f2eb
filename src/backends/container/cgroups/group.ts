/**
 * A sandbox's group: one directory per hierarchy (`<mount>/<parent>/<name>`), limits written in
 * the version each controller lives in, and the handle that adds, counts, kills and removes.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import { CgroupDefaults } from './defaults.js'
import { detectLayout } from './detect.js'
import { errnoOf, fsError, removeGroupTree, writeValue } from './fsio.js'
import { freezeGroup, freezerState, thawGroup } from './freeze.js'
import { checkNames, ensureParent, groupHierarchies } from './hierarchy.js'
import { groupPids, killGroup } from './kill.js'
import { controllersNeeded, planLimitWrites, toKernelLimits } from './limits.js'
import { readEvents, readUsage } from './stats.js'
import type { CgroupOptions, CreateCgroupOptions, LayoutKey, SandboxCgroupHandle, SandboxLimits } from './types.js'

/**
 * A handle on the group `name` under the parent, whether or not it exists yet (after a restart,
 * the groups of adopted sandboxes are reopened this way). Synchronous: it only computes paths.
 * @throws WARREN_ERR_INVALID_ARGUMENT for a bad name or parent
 */
export function openSandboxCgroup (name: string, opts: CgroupOptions = {}): SandboxCgroupHandle {
  const parent = opts.parent ?? CgroupDefaults.parent
  checkNames(name, parent)
  const layout = opts.layout ?? detectLayout()
  const hierarchies = groupHierarchies(layout)
  const dirs = hierarchies.map((h) => join(h.placement.mount, parent, name))
  const byKey = new Map<LayoutKey, { dir: string, version: 1 | 2 }>()
  for (const h of hierarchies) {
    for (const key of h.keys) byKey.set(key, { dir: join(h.placement.mount, parent, name), version: h.placement.version })
  }
  const lookup = (key: LayoutKey): { dir: string, version: 1 | 2 } | undefined => byKey.get(key)
  const v2 = hierarchies.find((h) => h.placement.version === 2)
  const target = {
    dirs,
    v2Dir: v2 !== undefined ? join(v2.placement.mount, parent, name) : undefined,
    freezer: lookup('freezer')
  }

  const handle: SandboxCgroupHandle = {
    name,
    parent,
    dirs: [...dirs],
    procsFiles: dirs.map((d) => join(d, 'cgroup.procs')),
    dirOf: (key) => lookup(key)?.dir,

    async addProcess (pid) {
      if (!Number.isSafeInteger(pid) || pid <= 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad pid ${pid}`, { field: 'pid' })
      for (const dir of dirs) {
        const file = join(dir, 'cgroup.procs')
        try {
          await writeValue(file, `${pid}\n`)
        } catch (err) {
          if (errnoOf(err) === 'ESRCH') throw createError(ErrorCodes.NOT_FOUND, `no process ${pid} to add to cgroup ${name}`, { pid })
          if (errnoOf(err) === 'ENOENT') throw createError(ErrorCodes.NOT_FOUND, `cgroup ${dir} does not exist (removed, or never created)`, { path: dir })
          throw fsError(err, 'join', file, String(pid))
        }
      }
    },

    pids: async () => await groupPids(dirs),
    events: async () => await readEvents(lookup),
    oomKills: async () => (await readEvents(lookup)).oomKills,
    oomKilled: async () => (await readEvents(lookup)).oomKills > 0,
    usage: async () => await readUsage(lookup),

    async killAll (kill = {}) {
      await killGroup(target, { timeoutMs: kill.timeoutMs ?? CgroupDefaults.killTimeoutMs, via: kill.via ?? 'auto' })
    },

    async freeze (opts = {}) {
      if (target.freezer === undefined) throw createError(ErrorCodes.UNSUPPORTED, 'this host has no cgroup freezer (v1 freezer or v2 cgroup.freeze): sandboxes cannot be paused', {})
      await freezeGroup(target.freezer, opts.timeoutMs ?? CgroupDefaults.freezeTimeoutMs)
    },

    async thaw () {
      if (target.freezer !== undefined) await thawGroup(target.freezer)
    },

    frozen: async () => target.freezer !== undefined && await freezerState(target.freezer) !== 'thawed',

    async remove (rm = {}) {
      const timeoutMs = rm.timeoutMs ?? CgroupDefaults.removeTimeoutMs
      // rmdir refuses a group with processes (EBUSY): empty it first.
      await killGroup(target, { timeoutMs, via: 'auto' })
      const deadline = Date.now() + timeoutMs
      for (const dir of dirs) await removeGroupTree(dir, deadline, CgroupDefaults.pollMs)
    }
  }
  return handle
}

/**
 * Creates (or re-limits, when it exists) the group `name` under the parent in every hierarchy a
 * sandbox needs, and writes its limits: memory (no swap; v2 memory.oom.group), CPU as a CFS
 * quota, pids. A half-made group is removed again when a step fails.
 * @param name the sandbox id: 1–63 of [A-Za-z0-9_.-]
 * @param limits 0 or absent means unlimited
 * @throws WARREN_ERR_INVALID_ARGUMENT bad name, parent or limits
 * @throws WARREN_ERR_UNSUPPORTED a limit whose controller the host lacks, no cgroup hierarchy, no permission
 */
export async function createSandboxCgroup (name: string, limits: SandboxLimits = {}, opts: CreateCgroupOptions = {}): Promise<SandboxCgroupHandle> {
  const layout = opts.layout ?? detectLayout()
  const handle = openSandboxCgroup(name, { ...opts, layout })
  const kernel = toKernelLimits(limits)
  const missing = controllersNeeded(kernel).filter((c) => layout[c] === undefined)
  if (missing.length > 0) {
    throw createError(ErrorCodes.UNSUPPORTED, `this host has no ${missing.join(', ')} cgroup controller for the requested limits`, { controllers: missing })
  }
  const hierarchies = groupHierarchies(layout)
  if (hierarchies.length === 0) throw createError(ErrorCodes.UNSUPPORTED, 'no cgroup hierarchy is mounted', {})

  const created: string[] = []
  try {
    for (const h of hierarchies) {
      await ensureParent(h.placement, handle.parent, layout)
      const dir = join(h.placement.mount, handle.parent, name)
      try {
        await mkdir(dir)
        created.push(dir)
      } catch (err) {
        if (errnoOf(err) !== 'EEXIST') throw fsError(err, 'create', dir)
      }
    }
    for (const controller of ['memory', 'cpu', 'pids'] as const) {
      const placement = layout[controller]
      const dir = handle.dirOf(controller)
      if (placement === undefined || dir === undefined) continue
      for (const w of planLimitWrites(controller, placement.version, kernel, { oomGroup: opts.oomGroup ?? CgroupDefaults.oomGroup })) {
        const file = join(dir, w.file)
        try {
          await writeValue(file, w.value)
        } catch (err) {
          if (!(w.optional && errnoOf(err) === 'ENOENT')) throw fsError(err, 'write', file, w.value)
        }
      }
    }
  } catch (err) {
    // Only what this call made: an existing group (a re-limit that failed) stays as it was found.
    const deadline = Date.now() + CgroupDefaults.removeTimeoutMs
    for (const dir of created.reverse()) await removeGroupTree(dir, deadline, CgroupDefaults.pollMs).catch(() => {})
    throw err
  }
  return handle
}
