/**
 * The session's lifecycle requests: kill (one sandbox, a list, or those with some labels) and
 * set-ttl. A kill answers only when the directory has recorded each sandbox's end, which is
 * when it gives back the sandbox's placement reservation and quota: so a create sent right
 * after a kill finds the room, and the SDK's handle can say `gone` at once.
 */
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes, isWarrenError, toWireError, type WireError } from '../../errors.js'
import { checkTtl, type EndReason, type SandboxInfo, type SandboxMessage } from '../sandbox/index.js'
import { hasEnded, type DirectoryMessage, type RecordState, type SandboxRecord } from './directory.js'
import { toPublicError } from './public-error.js'
import { RequestLimits } from './requests.js'

export const LifecycleDefaults = {
  /** Sandboxes one kill may name or match. */
  maxKill: RequestLimits.maxKillIds,
  /** How long a kill waits for its sandboxes to end (a container's reclaim takes seconds). */
  endWaitMs: 60_000,
  /** How long the sandbox actor has to take the kill. */
  sandboxAskMs: 10_000,
  /** What the session's own ask to the directory adds to `endWaitMs`. */
  marginMs: 5000
}

/** What became of one sandbox a kill of many named. */
export type KillOutcome =
  /** It ended: `killed` when this kill ended it, false when it had ended before. */
  | { id: string, ok: true, killed: boolean, state: RecordState, reason?: EndReason }
  /** Not the tenant's (`WARREN_ERR_NOT_FOUND`, like an id that never existed), or it did not end in time (`WARREN_ERR_TIMEOUT`). */
  | { id: string, ok: false, error: WireError }

export interface LifecycleDeps {
  tenant: string
  directory: () => Ref<DirectoryMessage>
  refFor: (address: string) => Ref<SandboxMessage> | undefined
}

/**
 * Kills the given records (all the tenant's) and waits until each has ended.
 * @returns the records as they are after the wait, in order (undefined when one was forgotten meanwhile)
 */
async function killAndWait (d: LifecycleDeps, records: SandboxRecord[]): Promise<Array<SandboxRecord | undefined>> {
  const live = records.filter((r) => !hasEnded(r.state))
  // A hibernated one has no actor: the directory ends it; a hibernating one ends instead of hibernating.
  if (live.length > 0) d.directory().tell({ type: 'killing', tenant: d.tenant, ids: live.map((r) => r.id) })
  await Promise.all(live.filter((r) => r.state !== 'hibernated').map(async (r) => {
    // An actor already gone or a node not connected is ending anyway (or will be declared
    // lost): the wait below learns the outcome either way.
    await d.refFor(r.address)?.ask({ type: 'kill' }, { timeoutMs: LifecycleDefaults.sandboxAskMs }).catch(() => {})
  }))
  if (live.length === 0) return records
  return await d.directory().ask<Array<SandboxRecord | undefined>>(
    { type: 'await-end', tenant: d.tenant, ids: records.map((r) => r.id), timeoutMs: LifecycleDefaults.endWaitMs },
    { timeoutMs: LifecycleDefaults.endWaitMs + LifecycleDefaults.marginMs })
}

function notEnded (id: string): WireError {
  return toWireError(createError(ErrorCodes.TIMEOUT, `sandbox ${id} did not end within ${LifecycleDefaults.endWaitMs} ms of its kill`, { id }))
}

/**
 * Kills one sandbox and answers with its record once it has ended. Killing one that has
 * ended already is not an error: it answers with that record.
 * @throws WARREN_ERR_TIMEOUT when it did not end in time
 */
export async function killOne (d: LifecycleDeps, record: SandboxRecord): Promise<SandboxRecord> {
  const [after] = await killAndWait(d, [record])
  const r = after ?? record
  if (!hasEnded(r.state)) throw createError(ErrorCodes.TIMEOUT, notEnded(r.id).message, { id: r.id })
  return r
}

/**
 * Kills many sandboxes in one request: those named (another tenant's, or unknown, are
 * NOT_FOUND each and left alone), or the tenant's live ones with all of `labels`.
 * @returns one outcome per id, in the order named (for labels, those killed)
 */
export async function killMany (d: LifecycleDeps, target: { ids: string[] } | { labels: Record<string, string> }): Promise<KillOutcome[]> {
  let ids: string[]
  let records: Array<SandboxRecord | undefined>
  if ('ids' in target) {
    ids = target.ids
    records = await Promise.all(ids.map((id) => d.directory().ask<SandboxRecord>({ type: 'get', tenant: d.tenant, id }).catch(() => undefined)))
  } else {
    records = await d.directory().ask<SandboxRecord[]>({ type: 'list', tenant: d.tenant, labels: target.labels, limit: LifecycleDefaults.maxKill })
    ids = records.map((r) => r!.id)
  }
  const known = records.filter((r): r is SandboxRecord => r !== undefined)
  const endedBefore = new Set(known.filter((r) => hasEnded(r.state)).map((r) => r.id))
  const after = new Map<string, SandboxRecord>()
  for (const r of await killAndWait(d, [...new Map(known.map((r) => [r.id, r])).values()])) if (r !== undefined) after.set(r.id, r)
  return ids.map((id, i): KillOutcome => {
    if (records[i] === undefined) return { id, ok: false, error: toWireError(createError(ErrorCodes.NOT_FOUND, `no sandbox ${id}`, { id, field: 'ids' })) }
    const r = after.get(id) ?? records[i]!
    if (!hasEnded(r.state)) return { id, ok: false, error: notEnded(id) }
    return { id, ok: true, killed: !endedBefore.has(id), state: r.state, ...(r.reason !== undefined ? { reason: r.reason } : {}) }
  })
}

/**
 * Lengthens or shortens a sandbox's life: it ends `ttlMs` from now. Its whole life, from its
 * creation, stays within the spec's maximum (`SpecDefaults.maxTtlMs`).
 * @returns the record with its new `expiresAt`
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `ttlMs` beyond the maximum; WARREN_ERR_SANDBOX_GONE when it has ended
 */
export async function setTtl (d: LifecycleDeps, record: SandboxRecord, ttlMs: number): Promise<SandboxRecord> {
  const now = Date.now()
  const expiresAt = checkTtl(ttlMs, record.createdAt, now, record.id)
  if (hasEnded(record.state)) throw gone(record)
  if (record.state === 'hibernated') {
    // No actor to tell: the record's end is what a resume creates it to.
    d.directory().tell({ type: 'set-expiry', tenant: d.tenant, id: record.id, expiresAt })
    return { ...record, expiresAt }
  }
  const ref = d.refFor(record.address)
  if (ref === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the node of sandbox ${record.id} is not connected`, { id: record.id, state: 'lost' })
  try {
    await ref.ask<SandboxInfo>({ type: 'set-ttl', ttlMs }, { timeoutMs: LifecycleDefaults.sandboxAskMs })
  } catch (err) {
    if (isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) || isWarrenError(err, ErrorCodes.SANDBOX_GONE)) throw err
    throw toPublicError(err, record.id)
  }
  d.directory().tell({ type: 'set-expiry', tenant: d.tenant, id: record.id, expiresAt })
  return { ...record, expiresAt }
}

/** The error of a request to a sandbox that has ended. */
export function gone (r: SandboxRecord): Error {
  return createError(ErrorCodes.SANDBOX_GONE, `sandbox ${r.id} is ${r.state}${r.reason !== undefined ? ` (${r.reason})` : ''}`, { id: r.id, state: r.state, ...(r.reason !== undefined ? { reason: r.reason } : {}) })
}
