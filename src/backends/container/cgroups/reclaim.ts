/**
 * Finding and reclaiming sandbox groups nobody owns any more: a node that restarts keeps the
 * groups of the sandboxes it re-adopts and removes the rest (killing what still runs in them).
 */
import { rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import { CgroupDefaults } from './defaults.js'
import { detectLayout } from './detect.js'
import { childGroups, errnoOf } from './fsio.js'
import { checkNames, groupHierarchies, isValidName } from './hierarchy.js'
import { openSandboxCgroup } from './group.js'
import type { CgroupOptions } from './types.js'

/**
 * Names of the sandbox groups under the parent whose names start with `prefix`, in any
 * hierarchy (a crash mid-create can leave a group in some hierarchies only), sorted.
 */
export async function listSandboxCgroups (prefix: string, opts: CgroupOptions = {}): Promise<string[]> {
  const parent = opts.parent ?? CgroupDefaults.parent
  checkNames('x', parent)
  const names = new Set<string>()
  for (const h of groupHierarchies(opts.layout ?? detectLayout())) {
    for (const name of await childGroups(join(h.placement.mount, parent))) {
      if (name.startsWith(prefix) && isValidName(name)) names.add(name)
    }
  }
  return [...names].sort()
}

/**
 * Removes every sandbox group under the parent whose name starts with `prefix` and is not in
 * `keep`, killing its processes first. Each group is tried even when another fails.
 * @returns the names reclaimed
 * @throws the first failure (WARREN_ERR_TIMEOUT …), `details.failed` listing every group that stayed
 */
export async function reclaimOrphans (prefix: string, keep: ReadonlySet<string>, opts: CgroupOptions = {}): Promise<string[]> {
  const reclaimed: string[] = []
  const failed: Array<{ name: string, error: string }> = []
  let first: unknown
  for (const name of await listSandboxCgroups(prefix, opts)) {
    if (keep.has(name)) continue
    try {
      await openSandboxCgroup(name, opts).remove()
      reclaimed.push(name)
    } catch (err) {
      first ??= err
      failed.push({ name, error: err instanceof Error ? err.message : String(err) })
    }
  }
  if (first !== undefined) {
    throw createError(ErrorCodes.TIMEOUT, `could not reclaim ${failed.length} cgroup(s): ${failed[0]!.error}`, { failed, reclaimed })
  }
  return reclaimed
}

/**
 * Removes the parent group (and its ancestors up to the mount, when empty) from every hierarchy.
 * A parent that still holds sandbox groups stays: true is returned only when all are gone.
 */
export async function removeParentGroups (opts: CgroupOptions = {}): Promise<boolean> {
  const parent = opts.parent ?? CgroupDefaults.parent
  checkNames('x', parent)
  let allGone = true
  for (const h of groupHierarchies(opts.layout ?? detectLayout())) {
    const segments = parent.split('/')
    while (segments.length > 0) {
      try {
        await rmdir(join(h.placement.mount, ...segments))
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') { segments.pop(); continue }
        // EBUSY / ENOTEMPTY: sandbox groups (or another user's groups above) are still there.
        if (segments.length === parent.split('/').length) allGone = false
        break
      }
      segments.pop()
    }
  }
  return allGone
}
