/**
 * Cgroups for container sandboxes, on v1, v2 or a mix: one group per sandbox in every
 * hierarchy that holds a controller we limit, under a per-node parent (`warren-<node>`), so a
 * node reclaims only its own leftovers.
 *
 * Limits: memory (no swap beyond it), CPU as a fraction of cores (CFS quota over a 100 ms
 * period), pids. OOM kills stay inside the group: the kernel picks the largest process there,
 * which is the command, not the small agent (v2 `memory.oom.group` stays 0 for that reason).
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { mkdir, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import type { CgroupProvider, SandboxCgroup } from '../backend.js'
import { CONTROLLERS, detectLayout, type CgroupLayout, type Controller, type ControllerPlace } from './layout.js'

export const CgroupDefaults = { cpuPeriodUs: 100_000, removeTimeoutMs: 5000 }

type Limits = Parameters<CgroupProvider['create']>[1]

function write (path: string, value: string): void {
  writeFileSync(path, value)
}

function tryWrite (path: string, value: string): boolean {
  try { writeFileSync(path, value); return true } catch { return false }
}

/** The group directories of one parent, one per distinct hierarchy in use. */
function hierarchies (layout: CgroupLayout): Map<string, { place: ControllerPlace, controllers: Controller[] }> {
  const out = new Map<string, { place: ControllerPlace, controllers: Controller[] }>()
  for (const c of CONTROLLERS) {
    const place = layout[c]
    if (place === undefined) continue
    const h = out.get(place.mount) ?? { place, controllers: [] }
    h.controllers.push(c)
    out.set(place.mount, h)
  }
  return out
}

/** Kills every process of a group, then removes it, retrying while the kernel still counts them. */
async function killAndRemove (dir: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    let pids: string[] = []
    try { pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter((p) => p !== '') } catch { return }
    for (const pid of pids) { try { process.kill(Number(pid), 'SIGKILL') } catch { /* gone */ } }
    try {
      await rmdir(dir)
      return
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      if (code !== 'EBUSY' || Date.now() > deadline) throw createError(ErrorCodes.TIMEOUT, `cgroup ${dir} cannot be removed: ${code}`)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
}

/** The handle of one sandbox's groups. */
function handleFor (dirs: string[], memoryDir: { dir: string, version: 1 | 2 } | undefined): SandboxCgroup {
  return {
    dirs,
    async oomKills () {
      if (memoryDir === undefined) return 0
      const file = memoryDir.version === 2 ? 'memory.events' : 'memory.oom_control'
      try {
        const m = /oom_kill (\d+)/.exec(readFileSync(join(memoryDir.dir, file), 'utf8'))
        return m === null ? 0 : Number(m[1])
      } catch {
        return 0
      }
    },
    async remove () {
      for (const dir of [...dirs].reverse()) await killAndRemove(dir, CgroupDefaults.removeTimeoutMs)
    }
  }
}

/**
 * Makes the cgroup provider of one node.
 * @param parentName the per-node parent group (e.g. `warren-node1`)
 */
export function createCgroupProvider (parentName: string, layout: CgroupLayout = detectLayout()): CgroupProvider & { layout: CgroupLayout } {
  const hs = hierarchies(layout)
  const parents = new Map<string, string>()

  async function parentFor (mount: string, place: ControllerPlace, controllers: Controller[]): Promise<string> {
    const known = parents.get(mount)
    if (known !== undefined) return known
    const parent = join(mount, parentName)
    await mkdir(parent, { recursive: true })
    if (place.version === 2) {
      // v2 hands a controller down only where each ancestor's subtree_control enables it.
      const enable = controllers.map((c) => `+${c}`).join(' ')
      tryWrite(join(mount, 'cgroup.subtree_control'), enable)
      write(join(parent, 'cgroup.subtree_control'), enable)
    }
    parents.set(mount, parent)
    return parent
  }

  return {
    layout,

    async create (id, limits: Limits) {
      const dirs: string[] = []
      let memoryDir: { dir: string, version: 1 | 2 } | undefined
      try {
        for (const [mount, { place, controllers }] of hs) {
          const dir = join(await parentFor(mount, place, controllers), id)
          await mkdir(dir)
          dirs.push(dir)
          for (const c of controllers) {
            if (c === 'memory' && limits.memoryMiB > 0) {
              const bytes = String(limits.memoryMiB * 1024 * 1024)
              if (place.version === 2) {
                write(join(dir, 'memory.max'), bytes)
                tryWrite(join(dir, 'memory.swap.max'), '0')
              } else {
                write(join(dir, 'memory.limit_in_bytes'), bytes)
                tryWrite(join(dir, 'memory.memsw.limit_in_bytes'), bytes) // only with swap accounting
              }
              memoryDir = { dir, version: place.version }
            } else if (c === 'memory') {
              memoryDir = { dir, version: place.version }
            }
            if (c === 'cpu' && limits.cpus > 0) {
              const quota = Math.max(1000, Math.round(limits.cpus * CgroupDefaults.cpuPeriodUs))
              if (place.version === 2) write(join(dir, 'cpu.max'), `${quota} ${CgroupDefaults.cpuPeriodUs}`)
              else {
                write(join(dir, 'cpu.cfs_period_us'), String(CgroupDefaults.cpuPeriodUs))
                write(join(dir, 'cpu.cfs_quota_us'), String(quota))
              }
            }
            if (c === 'pids' && limits.pids > 0) write(join(dir, 'pids.max'), String(limits.pids))
          }
        }
      } catch (err) {
        for (const dir of dirs.reverse()) await killAndRemove(dir, CgroupDefaults.removeTimeoutMs).catch(() => {})
        throw createError(ErrorCodes.INTERNAL, `cgroup set-up for ${id} failed: ${(err as Error).message}`)
      }
      return handleFor(dirs, memoryDir)
    },

    open (id) {
      const dirs: string[] = []
      let memoryDir: { dir: string, version: 1 | 2 } | undefined
      for (const [mount, { place, controllers }] of hs) {
        const dir = join(mount, parentName, id)
        if (!existsSync(dir)) continue
        dirs.push(dir)
        if (controllers.includes('memory')) memoryDir = { dir, version: place.version }
      }
      return dirs.length === 0 ? undefined : handleFor(dirs, memoryDir)
    },

    async close () {
      for (const mount of hs.keys()) await rmdir(join(mount, parentName)).catch(() => {}) // only if empty
      parents.clear()
    },

    async reclaimOrphans (keep) {
      for (const mount of hs.keys()) {
        const parent = join(mount, parentName)
        if (!existsSync(parent)) continue
        for (const entry of readdirSync(parent, { withFileTypes: true })) {
          if (entry.isDirectory() && !keep.has(entry.name)) await killAndRemove(join(parent, entry.name), CgroupDefaults.removeTimeoutMs).catch(() => {})
        }
      }
    }
  }
}
