/**
 * Which hierarchies a sandbox group occupies, and the parent group in each: created on demand,
 * and in v2 with the needed controllers enabled in every `cgroup.subtree_control` on the way
 * down (a v2 group only gets a controller its parent enables for its children).
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import { errnoOf, fsError, readOptional, writeValue } from './fsio.js'
import type { CgroupLayout, LayoutKey, Placement } from './types.js'

/** One hierarchy a sandbox group lives in, and the layout keys it serves there. */
export interface GroupHierarchy {
  placement: Placement
  keys: LayoutKey[]
}

const NAME = /^[A-Za-z0-9_.-]{1,63}$/

/** True for a usable group name: 1–63 of [A-Za-z0-9_.-], not `.` or `..`. */
export function isValidName (name: string): boolean {
  return NAME.test(name) && name !== '.' && name !== '..'
}

/**
 * Checks a sandbox group name and a parent path (names joined by `/`).
 * @throws WARREN_ERR_INVALID_ARGUMENT
 */
export function checkNames (name: string, parent: string): void {
  if (!isValidName(name)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad cgroup name ${JSON.stringify(name)}: 1-63 of [A-Za-z0-9_.-]`, { field: 'name' })
  if (!parent.split('/').every(isValidName)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad cgroup parent ${JSON.stringify(parent)}: names of [A-Za-z0-9_.-] joined by /`, { field: 'parent' })
}

/**
 * The hierarchies a group needs: those of memory, cpu, pids and freezer, and the unified one
 * (v2 tracks every process there and offers cgroup.kill and cpu.stat even with no controller
 * bound). cpuacct only where no unified hierarchy gives CPU usage. One entry per mount.
 */
export function groupHierarchies (layout: CgroupLayout): GroupHierarchy[] {
  const keys: LayoutKey[] = ['memory', 'cpu', 'pids', 'freezer', 'unified']
  if (layout.unified === undefined) keys.push('cpuacct')
  const byMount = new Map<string, GroupHierarchy>()
  for (const key of keys) {
    const placement = layout[key]
    if (placement === undefined) continue
    const h = byMount.get(placement.mount)
    if (h !== undefined) h.keys.push(key)
    else byMount.set(placement.mount, { placement, keys: [key] })
  }
  return [...byMount.values()]
}

/** v2 controllers of `layout` that live in the hierarchy mounted at `mount`. */
function v2ControllersAt (layout: CgroupLayout, mount: string): string[] {
  return (['memory', 'cpu', 'pids'] as const).filter((c) => layout[c]?.version === 2 && layout[c]?.mount === mount)
}

async function enableControllers (dir: string, wanted: string[]): Promise<void> {
  const file = join(dir, 'cgroup.subtree_control')
  const have = ((await readOptional(file)) ?? '').trim().split(/\s+/)
  for (const c of wanted) {
    if (have.includes(c)) continue
    try {
      await writeValue(file, `+${c}`)
    } catch (err) {
      if (errnoOf(err) === 'EBUSY') {
        // v2's "no internal processes" rule: a non-root group with processes of its own cannot
        // hand controllers to children (typical inside a container whose init sits in the mount's group).
        throw createError(ErrorCodes.UNSUPPORTED, `cannot enable ${c} in ${file}: the group holds processes of its own; move them into a child group first`, { path: file, errno: 'EBUSY', controller: c })
      }
      throw fsError(err, 'enable', file, `+${c}`)
    }
  }
}

/**
 * Makes sure `parent` exists in the hierarchy of `placement`; in v2 also enables, from the
 * mount's group down to `parent`, the controllers the layout puts in this hierarchy.
 * Cheap enough to run on every create (a mkdir and a few reads), so nothing is cached and a
 * parent removed by someone else is simply made again.
 */
export async function ensureParent (placement: Placement, parent: string, layout: CgroupLayout): Promise<void> {
  const top = join(placement.mount, parent)
  try {
    await mkdir(top, { recursive: true })
  } catch (err) {
    throw fsError(err, 'create', top)
  }
  if (placement.version !== 2) return
  const wanted = v2ControllersAt(layout, placement.mount)
  if (wanted.length === 0) return
  let dir = placement.mount
  await enableControllers(dir, wanted)
  for (const segment of parent.split('/')) {
    dir = join(dir, segment)
    await enableControllers(dir, wanted)
  }
}
