/**
 * Emptying a group. v2's `cgroup.kill` (kernel 5.14+) kills every process of a group and its
 * subgroups in one write, with no race against forks. Without it: freeze the group so nothing
 * can fork or exit (and no pid can be reused) between listing and killing, SIGKILL each listed
 * process, thaw so the kills land (v1 frozen tasks die only when thawed), and repeat until empty.
 * A group paused by its owner is killed the same way: both paths end thawed (freeze.ts).
 */
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import { CgroupDefaults } from './defaults.js'
import { freezerState, setFrozen, type Freezer } from './freeze.js'
import { errnoOf, fsError, listPids, writeValue } from './fsio.js'

/** Where a group can be killed and frozen. */
export interface KillTarget {
  /** The group in every hierarchy; the group is empty when all of them are. */
  dirs: readonly string[]
  /** The group's v2 directory (for cgroup.kill), if it has one. */
  v2Dir: string | undefined
  /** The group's freezer: a v1 freezer group or a v2 group (cgroup.freeze). */
  freezer: Freezer | undefined
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Every process of the group in any of its hierarchies, without duplicates, sorted. */
export async function groupPids (dirs: readonly string[]): Promise<number[]> {
  const all = new Set<number>()
  for (const dir of dirs) for (const pid of await listPids(dir)) all.add(pid)
  return [...all].sort((a, b) => a - b)
}

async function waitEmpty (dirs: readonly string[], until: number): Promise<boolean> {
  for (;;) {
    if ((await groupPids(dirs)).length === 0) return true
    if (Date.now() > until) return false
    await sleep(CgroupDefaults.pollMs)
  }
}

/** Writes 1 to cgroup.kill; false when the kernel has no cgroup.kill (or the group is gone). */
async function writeCgroupKill (v2Dir: string): Promise<boolean> {
  const file = join(v2Dir, 'cgroup.kill')
  try {
    await writeValue(file, '1')
    return true
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return false
    throw fsError(err, 'kill', file, '1')
  }
}

/** SIGKILL, where a process already gone is fine. */
function sigkill (pid: number): void {
  try { process.kill(pid, 'SIGKILL') } catch (err) { if (errnoOf(err) !== 'ESRCH') throw err }
}

async function killBySignals (target: KillTarget, deadline: number): Promise<void> {
  const { freezer } = target
  let thawNeeded = false
  try {
    for (;;) {
      let pids = await groupPids(target.dirs)
      if (pids.length === 0) return
      if (Date.now() > deadline) {
        throw createError(ErrorCodes.TIMEOUT, `cgroup ${target.dirs[0] ?? ''} still has processes after the kill`, { dirs: [...target.dirs], pids })
      }
      if (freezer !== undefined) {
        thawNeeded = true
        await setFrozen(freezer, true)
        // Tasks in uninterruptible sleep delay freezing; past the bound the kill goes ahead and the next round catches stragglers.
        const until = Math.min(deadline, Date.now() + CgroupDefaults.freezeWaitMs)
        while (await freezerState(freezer) === 'freezing' && Date.now() < until) await sleep(CgroupDefaults.pollMs)
        pids = await groupPids(target.dirs)
      }
      for (const pid of pids) sigkill(pid)
      if (freezer !== undefined) { await setFrozen(freezer, false); thawNeeded = false }
      await waitEmpty(target.dirs, Math.min(deadline, Date.now() + 100))
    }
  } finally {
    // Never leave a group frozen: a frozen task cannot even die.
    if (thawNeeded && freezer !== undefined) await setFrozen(freezer, false).catch(() => {})
  }
}

/**
 * Kills every process of a group and waits until it is empty in every hierarchy.
 * @throws WARREN_ERR_TIMEOUT when processes remain after `timeoutMs`
 */
export async function killGroup (target: KillTarget, opts: { timeoutMs: number, via: 'auto' | 'signals' }): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs
  if (opts.via === 'auto' && target.v2Dir !== undefined && await writeCgroupKill(target.v2Dir)) {
    // A paused group's tasks in a v1 freezer die only once thawed: the kill is pending, so
    // thawing now lets nothing run but their exit.
    if (target.freezer !== undefined) await setFrozen(target.freezer, false)
    // Usually empty within a few ms; whatever is left (a process only in v1 groups) gets signals.
    await waitEmpty(target.dirs, deadline)
  }
  await killBySignals(target, deadline)
}
