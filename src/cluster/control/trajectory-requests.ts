/**
 * The session's trajectory requests: pages of steps and ranges of record blobs, read from the
 * control plane's store — so they work while the sandbox runs, after it ended, and after a
 * restart of the control plane. A live sandbox is asked first to get what it recorded so far to
 * the store (bounded), so a read right after a command sees its step.
 */
import type { Ref } from '../../actors/index.js'
import { ErrorCodes, isWarrenError } from '../../errors.js'
import type { SandboxMessage } from '../sandbox/index.js'
import { NodeTrajectoryDefaults, type TrajectoriesMessage, type TrajectoryPage } from '../trajectory/index.js'
import { hasEnded, type DirectoryMessage, type SandboxRecord } from './directory.js'
import type { ClientRequest } from './requests.js'

export interface TrajectoryDeps {
  tenant: string
  directory: () => Ref<DirectoryMessage>
  trajectories: () => Ref<TrajectoriesMessage>
  refFor: (address: string) => Ref<SandboxMessage> | undefined
}

/**
 * A page of the tenant's trajectory of sandbox `id`.
 * @throws WARREN_ERR_NOT_FOUND for a sandbox the tenant never had (another tenant's too) or whose trajectory is past its retention
 */
export async function readTrajectory (d: TrajectoryDeps, m: Extract<ClientRequest, { type: 'trajectory' }>): Promise<TrajectoryPage> {
  const record = await d.directory().ask<SandboxRecord>({ type: 'get', tenant: d.tenant, id: m.id }).catch((err: unknown) => {
    if (isWarrenError(err, ErrorCodes.NOT_FOUND)) return undefined
    throw err
  })
  if (record !== undefined && !hasEnded(record.state)) {
    // Best effort: a node that cannot say in time leaves the read to what the store has.
    await d.refFor(record.address)?.ask({ type: 'trajectory-flush' }, { timeoutMs: NodeTrajectoryDefaults.flushWaitMs + 1000 }).catch(() => {})
  }
  const fromSeq = m.fromSeq ?? 0
  try {
    return await d.trajectories().ask<TrajectoryPage>({ type: 'read', tenant: d.tenant, sandboxId: m.id, fromSeq, ...(m.limit !== undefined ? { limit: m.limit } : {}) })
  } catch (err) {
    // The sandbox is the tenant's and runs: its first records are still on their way.
    if (record !== undefined && !hasEnded(record.state) && isWarrenError(err, ErrorCodes.NOT_FOUND)) return { steps: [], nextSeq: fromSeq, complete: false }
    throw err
  }
}

/**
 * Bytes of a record blob the tenant's trajectory of `id` references.
 * @throws WARREN_ERR_NOT_FOUND naming `digest` for one it does not reference (or `id` for a trajectory the tenant has not)
 */
export async function readTrajectoryBlob (d: TrajectoryDeps, m: Extract<ClientRequest, { type: 'trajectory-blob' }>): Promise<Uint8Array> {
  return await d.trajectories().ask<Uint8Array>({ type: 'blob', tenant: d.tenant, sandboxId: m.id, digest: m.digest, offset: m.offset, length: m.length })
}
