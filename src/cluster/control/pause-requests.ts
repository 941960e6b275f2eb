/**
 * The session's pause and resume: asked of the sandbox actor, which answers once its backend has
 * frozen or thawed it; the directory is told at once (the node's report of the same change,
 * numbered alike, follows), so an `info` or `list` right after the answer already says paused,
 * and placement has the sandbox's CPU share back before the trainer's next create.
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { SandboxInfo } from '../sandbox/index.js'
import { hasEnded, type SandboxRecord } from './directory.js'
import { gone, type LifecycleDeps } from './lifecycle.js'
import { toPublicError } from './public-error.js'

export const PauseRequestDefaults = {
  /** A freeze or thaw is a cgroup write, but it waits behind a snapshot being cut. */
  sandboxAskMs: 60_000
}

/**
 * Pauses or resumes a ready or paused sandbox of the tenant (pausing a paused one, or resuming a
 * ready one, answers as it is).
 * @returns the record as it is now
 * @throws WARREN_ERR_SANDBOX_GONE when it has ended (or is in a state it cannot be paused or resumed from);
 *   WARREN_ERR_UNSUPPORTED naming `backend` when its backend cannot pause
 */
export async function pauseOrResume (d: LifecycleDeps, record: SandboxRecord, type: 'pause' | 'resume'): Promise<SandboxRecord> {
  if (hasEnded(record.state) || (record.state !== 'ready' && record.state !== 'paused')) throw gone(record)
  const ref = d.refFor(record.address)
  if (ref === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the node of sandbox ${record.id} is not connected`, { id: record.id, state: 'lost' })
  let info: SandboxInfo
  try {
    info = await ref.ask<SandboxInfo>({ type }, { timeoutMs: PauseRequestDefaults.sandboxAskMs })
  } catch (err) {
    if (isWarrenError(err, ErrorCodes.UNSUPPORTED) || isWarrenError(err, ErrorCodes.SANDBOX_GONE)) throw err
    throw toPublicError(err, record.id)
  }
  if (info.state === 'paused' || info.state === 'ready') {
    d.directory().tell({ type: 'pause-state', tenant: d.tenant, id: record.id, state: info.state, pauseSeq: info.pauseSeq ?? 0, expiresAt: info.expiresAt })
  }
  return { ...record, state: info.state, expiresAt: info.expiresAt }
}
