/**
 * Finds, per controller, whether it lives in a v1 hierarchy (and where it is mounted) or in the
 * v2 unified hierarchy. A controller can be bound to one hierarchy only, so the answer is per
 * controller: a hybrid host mixes both, a modern host has everything in v2.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CgroupDefaults } from './defaults.js'
import { parseMountinfo, parseProcCgroups, type MountEntry } from './mountinfo.js'
import type { CgroupLayout, Controller, LayoutKey, V1Placement, V2Placement } from './types.js'

const CONTROLLERS: readonly Controller[] = ['memory', 'cpu', 'cpuacct', 'pids', 'freezer']
// Used when /proc/cgroups is missing: the v1 controller names a mount option can carry.
const KNOWN_V1 = ['cpuset', 'cpu', 'cpuacct', 'blkio', 'io', 'memory', 'devices', 'freezer', 'net_cls', 'perf_event', 'net_prio', 'hugetlb', 'pids', 'rdma', 'misc']

/** Reads a file as text, undefined when it cannot be read. */
export type TextReader = (path: string) => string | undefined

const readText: TextReader = (path) => {
  try { return readFileSync(path, 'utf8') } catch { return undefined }
}

// The same hierarchy may be mounted several times (bind mounts); the one showing its root sees every group.
function preferred (mounts: MountEntry[]): MountEntry | undefined {
  return mounts.find((m) => m.root === '/') ?? mounts[0]
}

/**
 * Computes the layout from the text of /proc/self/mountinfo and /proc/cgroups; `read` supplies
 * the unified hierarchy's `cgroup.controllers`. Pure apart from `read`, for tests with fixtures.
 */
export function layoutFrom (mountinfo: string, procCgroups: string | undefined, read: TextReader): CgroupLayout {
  const mounts = parseMountinfo(mountinfo)
  const known = procCgroups !== undefined ? parseProcCgroups(procCgroups) : undefined
  const isController = (opt: string): boolean => known !== undefined ? known.get(opt)?.enabled === true : KNOWN_V1.includes(opt)
  const layout: { -readonly [K in keyof CgroupLayout]: CgroupLayout[K] } = {}

  const v1 = mounts.filter((m) => m.fsType === 'cgroup')
  for (const c of CONTROLLERS) {
    const m = preferred(v1.filter((e) => e.superOptions.includes(c)))
    if (m === undefined) continue
    const placement: V1Placement = { version: 1, mount: m.mountPoint, root: m.root, controllers: m.superOptions.filter(isController) }
    layout[c] = placement
  }

  const unifiedMount = preferred(mounts.filter((m) => m.fsType === 'cgroup2'))
  if (unifiedMount !== undefined) {
    const unified: V2Placement = { version: 2, mount: unifiedMount.mountPoint, root: unifiedMount.root }
    layout.unified = unified
    // A controller is usable in v2 when the unified root offers it (it is not bound to a v1 hierarchy).
    const offered = (read(join(unified.mount, 'cgroup.controllers')) ?? '').trim().split(/\s+/)
    for (const c of ['memory', 'cpu', 'pids'] as const) {
      if (layout[c] === undefined && offered.includes(c)) layout[c] = unified
    }
    // The v2 freezer is core (cgroup.freeze in every non-root group), not a listed controller.
    if (layout.freezer === undefined) layout.freezer = unified
  }
  return layout
}

let cached: CgroupLayout | undefined

/**
 * The host's cgroup layout: for each of memory, cpu, cpuacct (v1 only), pids and freezer the
 * hierarchy it lives in, plus `unified`, the v2 hierarchy when one is mounted. Detected once
 * (mounts do not move under a running node); `refresh` detects again.
 */
export function detectLayout (opts: { refresh?: boolean } = {}): CgroupLayout {
  if (cached === undefined || opts.refresh === true) {
    cached = layoutFrom(readText(CgroupDefaults.mountinfoPath) ?? '', readText(CgroupDefaults.procCgroupsPath), readText)
  }
  return cached
}

/**
 * `v2` when every controller found is in the unified hierarchy; `hybrid` when v1 controllers sit
 * beside a mounted unified hierarchy (systemd's name for it); `v1` when there is no unified one.
 */
export function layoutMode (layout: CgroupLayout): 'v1' | 'v2' | 'hybrid' | 'none' {
  const versions = new Set(CONTROLLERS.map((c) => layout[c]?.version).filter((v) => v !== undefined))
  if (versions.size === 0) return 'none'
  if (!versions.has(1)) return 'v2'
  return layout.unified !== undefined ? 'hybrid' : 'v1'
}

/** One line per key, e.g. `memory: v1 at /sys/fs/cgroup/memory`, for logs and reports. */
export function describeLayout (layout: CgroupLayout): string {
  const keys: LayoutKey[] = [...CONTROLLERS, 'unified']
  return keys.map((k) => {
    const p = layout[k]
    return p === undefined ? `${k}: absent` : `${k}: v${p.version} at ${p.mount}${p.root !== '/' ? ` (root ${p.root})` : ''}`
  }).join('\n')
}
