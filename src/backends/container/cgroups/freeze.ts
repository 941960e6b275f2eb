/**
 * The freezer: stops every process of a group where it stands (memory kept, nothing runs) and
 * lets them go on later. v1 writes `freezer.state` (FROZEN / THAWED) and reads it back (FREEZING
 * until the last task stopped); v2 writes `cgroup.freeze` (1 / 0) and reads `frozen` from
 * `cgroup.events`. A frozen group's subgroups are frozen with it in both.
 *
 * Frozen tasks differ on death: in v2 a fatal signal still kills them, in v1 a SIGKILLed task
 * dies only once thawed, so whoever kills a frozen group thaws it after the signal (kill.ts).
 */
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'
import { CgroupDefaults } from './defaults.js'
import { errnoOf, fsError, keyValues, readOptional, writeValue } from './fsio.js'

/** A group's freezer: a v1 freezer group or a v2 group (cgroup.freeze). */
export interface Freezer { dir: string, version: 1 | 2 }

/** Where a freezer is: frozen (every task stopped), freezing (asked, not all stopped yet), thawed. */
export type FreezerState = 'thawed' | 'freezing' | 'frozen'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** The freezer's state; `thawed` when the group is gone. */
export async function freezerState (freezer: Freezer): Promise<FreezerState> {
  if (freezer.version === 1) {
    const state = (await readOptional(join(freezer.dir, 'freezer.state')))?.trim()
    return state === 'FROZEN' ? 'frozen' : state === 'FREEZING' ? 'freezing' : 'thawed'
  }
  const asked = (await readOptional(join(freezer.dir, 'cgroup.freeze')))?.trim() === '1'
  if (!asked) return 'thawed'
  return keyValues(await readOptional(join(freezer.dir, 'cgroup.events'))).get('frozen') === 1 ? 'frozen' : 'freezing'
}

/** Asks for the freezer state; ENOENT (group gone, or a kernel without the v2 freezer) is ignored. */
export async function setFrozen (freezer: Freezer, frozen: boolean): Promise<void> {
  const [file, value] = freezer.version === 1
    ? [join(freezer.dir, 'freezer.state'), frozen ? 'FROZEN' : 'THAWED']
    : [join(freezer.dir, 'cgroup.freeze'), frozen ? '1' : '0']
  try {
    await writeValue(file, value)
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw fsError(err, 'freeze', file, value)
  }
}

/**
 * Freezes the group and waits until every task has stopped. Idempotent. A group that does not
 * finish freezing in time (tasks in uninterruptible sleep on a stuck file system) is thawed
 * again, so a failed freeze never leaves it half-stopped.
 * @throws WARREN_ERR_NOT_FOUND when the group does not exist
 * @throws WARREN_ERR_TIMEOUT when it is not frozen within `timeoutMs`
 */
export async function freezeGroup (freezer: Freezer, timeoutMs: number = CgroupDefaults.freezeTimeoutMs): Promise<void> {
  const file = join(freezer.dir, freezer.version === 1 ? 'freezer.state' : 'cgroup.freeze')
  if (await readOptional(file) === undefined) throw createError(ErrorCodes.NOT_FOUND, `cgroup ${freezer.dir} has no freezer (removed, or never created)`, { path: freezer.dir })
  await setFrozen(freezer, true)
  const deadline = Date.now() + timeoutMs
  while (await freezerState(freezer) !== 'frozen') {
    if (Date.now() > deadline) {
      await setFrozen(freezer, false).catch(() => {})
      throw createError(ErrorCodes.TIMEOUT, `cgroup ${freezer.dir} did not freeze within ${timeoutMs} ms`, { path: freezer.dir, timeoutMs })
    }
    await sleep(CgroupDefaults.pollMs)
  }
}

/** Thaws the group (its tasks run on at once). Idempotent; a group that is gone is fine. */
export async function thawGroup (freezer: Freezer): Promise<void> {
  await setFrozen(freezer, false)
}
