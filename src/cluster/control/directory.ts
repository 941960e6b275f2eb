/**
 * SandboxDirectory: the control plane's record of every sandbox — owner, node, state. It is
 * where tenant isolation is enforced: a lookup with the wrong tenant answers exactly like an id
 * that never existed (`WARREN_ERR_NOT_FOUND`). When a sandbox ends (or its node is lost) the
 * directory frees its placement reservation and its quota, and tells the owner's sessions.
 *
 * A hibernated sandbox (snapshotted, then ended on its node) keeps its record, state
 * `hibernated`, with the snapshot it resumes from: it holds no node, reservation or quota, and
 * ends only when its TTL does or it is killed.
 * While a sandbox is paused its CPU share is given back to placement (it runs nothing), and
 * taken again when it resumes; its memory and its slot stay reserved.
 */
import { Actor, type ExitReason, type Ref } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import type { IamMessage } from '../iam/index.js'
import { withoutHostDirs, type SandboxSummary } from '../node/index.js'
import type { NodeUsage, PlacementRequest, ShardMessage } from '../placement/index.js'
import { placementRequestOf, type SandboxSpec } from '../spec.js'
import type { EndReason, SandboxEvent, SandboxState } from '../sandbox/index.js'
import { HibernatedSet, IdSets, usedBy } from './directory-hibernation.js'
import { RestoreClaims } from './directory-restore.js'
import type { HibernatedStore } from './hibernated-store.js'
import { EndWaits } from './end-waits.js'
import { shardOf } from './registry.js'

export type RecordState = SandboxState | 'lost' | 'hibernated'
/** Every state a sandbox's record can be in, in the order of its life. */
export const RECORD_STATES: readonly RecordState[] = ['creating', 'ready', 'paused', 'stopping', 'hibernated', 'gone', 'failed', 'lost']

export interface SandboxRecord {
  id: string
  tenant: string
  nodeId: string
  address: string
  state: RecordState
  backend: string
  labels: Record<string, string>
  createdAt: number
  expiresAt: number
  reason?: EndReason
  message?: string
  /** What placement reserved, to give back when the sandbox ends. */
  req: PlacementRequest
  /** The spec it was created with, as resolved (digests; a snapshot's layers in `image.diffs`). */
  spec: SandboxSpec
  endedAt?: number
  /** Hibernated: the snapshot it resumes from. */
  snapshot?: string
  /** Set while a hibernate is ending it on its node: its end makes it `hibernated`, not `gone`. */
  hibernating?: string
  /** Set once a kill of it was asked for: a hibernate that has not begun ending it must not (the kill wins). */
  killAsked?: boolean
  /** True while its CPU share is given back to placement (it is paused). */
  cpuFree?: boolean
  /** The newest pause or resume heard of (`SandboxInfo.pauseSeq`): an older report of one is ignored. */
  pauseSeq?: number
}

/** Told to subscribed sessions when one of their tenant's sandboxes changes state. */
export interface SandboxStateNotice { type: 'sandbox-state', id: string, state: RecordState, reason?: EndReason, message?: string }

export type DirectoryMessage =
  | { type: 'add', records: SandboxRecord[] }
  | { type: 'events', nodeId: string, events: SandboxEvent[] }
  | { type: 'node-lost', nodeId: string }
  | { type: 'node-sandboxes', nodeId: string, sandboxes: SandboxSummary[] }
  | { type: 'get', tenant: string, id: string }
  /** Live sandboxes only, unless `state` names one or `all` asks for ended ones too. */
  | { type: 'list', tenant: string, labels?: Record<string, string>, state?: RecordState, all?: boolean, limit?: number }
  /**
   * Answers once each named sandbox of the tenant has ended (its reservation and quota given
   * back), or when `timeoutMs` is up: the records, in order, `undefined` for an id the tenant has not.
   */
  | { type: 'await-end', tenant: string, ids: string[], timeoutMs: number }
  | { type: 'end-wait-expired', key: number }
  /** A sandbox's life was lengthened or shortened (`sb.setTtl`). */
  | { type: 'set-expiry', tenant: string, id: string, expiresAt: number }
  /** A session paused or resumed a sandbox (its node reports the same change, numbered alike). */
  | { type: 'pause-state', tenant: string, id: string, state: 'ready' | 'paused', pauseSeq: number, expiresAt: number }
  | { type: 'subscribe', tenant: string, ref: Ref }
  /**
   * A hibernate cut `snapshot` of the sandbox and is about to end it: its end makes the record
   * `hibernated` instead. Refused (QUOTA) when the tenant has `maxHibernatedPerTenant` already.
   */
  | { type: 'hibernating', tenant: string, id: string, snapshot: string }
  /**
   * A resume of hibernated sandbox `id` begins: true when it is this request's to make (the
   * tenant's, hibernated, no other resume of it under way), false otherwise; until `resumed` or
   * `resume-release`, no other resume of it begins.
   */
  | { type: 'resume-claim', tenant: string, id: string }
  | { type: 'resume-release', id: string }
  /** The same for a hibernate of live sandbox `id`: true when no other hibernate of it is under way, until `hibernate-release`. */
  | { type: 'hibernate-claim', tenant: string, id: string }
  | { type: 'hibernate-release', id: string }
  /** A hibernated sandbox runs again (same id) at `address`: answers false when it is no longer hibernated (killed meanwhile). */
  | { type: 'resumed', tenant: string, id: string, nodeId: string, address: string, spec: SandboxSpec, req: PlacementRequest }
  /** A kill of these is on its way: a hibernated one ends (`killed`), a hibernating one ends instead of hibernating. */
  | { type: 'killing', tenant: string, ids: string[] }
  /**
   * A restore of sandbox `id` begins: refused (INVALID_ARGUMENT naming `id`) while it is live or
   * hibernated, or another restore of it is under way; until `restored` or `restore-release`,
   * no other restore of it begins.
   */
  | { type: 'restore-claim', tenant: string, id: string }
  | { type: 'restore-release', id: string }
  /** A restore made the sandbox again under its id: `record` (ready, on its new node) takes the ended one's place; false when it is live again meanwhile. */
  | { type: 'restored', record: SandboxRecord }
  /** What live and hibernated sandboxes use: their layers and the snapshots they resume from (the snapshot GC keeps them). */
  | { type: 'in-use' }
  | { type: 'sweep' }
  | { type: 'count' }
  /** Records by state, then backend (for /metrics). */
  | { type: 'state-counts' }
  | { type: 'usage', nodeIds: string[] }

export const DirectoryDefaults = {
  /** Ended sandboxes stay visible (state gone/failed/lost, with a reason) this long… */
  endedRetentionMs: 5 * 60_000,
  /** …and at most this many of them, oldest forgotten first, so memory stays flat under churn. */
  maxEnded: 20_000,
  maxList: 10_000,
  sweepEveryMs: 10_000,
  /** Sandbox ids kills may wait on at once (each kill names at most 1000). */
  maxEndWaitIds: 100_000,
  /** Hibernated sandboxes a tenant may keep (they hold no quota, so this bounds their records). */
  maxHibernatedPerTenant: 10_000,
  /** Restores under way at once (each claims its sandbox's id until it is done). */
  maxRestoring: 10_000
}

export interface DirectoryOptions {
  shards: () => Ref<ShardMessage>[]
  iam: () => Ref<IamMessage>
  /** Where hibernated records outlive a restart (without it, in memory only). */
  hibernated?: HibernatedStore
}

const TERMINAL = new Set<RecordState>(['gone', 'failed', 'lost'])

/** True for the states a sandbox has ended in (`lost` too: a node that comes back may revive it). */
export function hasEnded (state: RecordState): boolean {
  return TERMINAL.has(state)
}

export class SandboxDirectory extends Actor<DirectoryMessage> {
  private readonly records = new Map<string, SandboxRecord>()
  private readonly byNode = new IdSets()
  private readonly subscribers = new Map<string, Set<Ref>>()
  /** Ended sandbox ids, oldest first (FIFO; ids may repeat harmlessly if one is already gone). */
  private ended: string[] = []
  private readonly endWaits = new EndWaits(DirectoryDefaults.maxEndWaitIds)
  /** Hibernated sandboxes: swept for their TTL, counted for the bound. */
  private readonly hibernated = new HibernatedSet(DirectoryDefaults.maxHibernatedPerTenant)
  /** Ids a restore is making again. */
  private readonly restoring = new RestoreClaims(DirectoryDefaults.maxRestoring)
  /** Hibernated ids a resume is making again (one resume each; the hibernated bound bounds it). */
  private readonly resuming = new Set<string>()
  /** Sandboxes a hibernate is being made of (its snapshot cut, its end awaited). */
  private readonly hibernateClaims = new Set<string>()

  constructor (private readonly o: DirectoryOptions) { super() }

  preStart (): void {
    // Hibernated sandboxes are on no node, so no node reports them: they come back from the store.
    for (const r of this.o.hibernated?.all() ?? []) {
      this.records.set(r.id, r)
      this.hibernated.add(r)
    }
    this.ctx.setTimer('sweep', DirectoryDefaults.sweepEveryMs, { type: 'sweep' }, { repeat: true })
  }

  receive (m: DirectoryMessage): unknown {
    switch (m.type) {
      case 'add':
        for (const r of m.records) {
          this.records.set(r.id, r)
          this.byNode.add(r.nodeId, r.id)
        }
        return undefined
      case 'events':
        for (const e of m.events) {
          const r = this.records.get(e.id)
          // A hibernated one is on no node: a late event of its old actor is not news.
          if (r === undefined || r.nodeId !== m.nodeId || TERMINAL.has(r.state) || r.state === 'hibernated') continue
          if (e.pauseSeq !== undefined && (e.state === 'paused' || e.state === 'ready')) { this.follow(r, e.state, e.pauseSeq, e.expiresAt); continue }
          if (e.reason !== undefined) r.reason = e.reason
          if (e.message !== undefined) r.message = withoutHostDirs(e.message)
          if (r.hibernating !== undefined && TERMINAL.has(e.state)) this.hibernate(r)
          else this.transition(r, e.state)
        }
        return undefined
      case 'node-lost':
        for (const id of this.byNode.of(m.nodeId)) {
          const r = this.records.get(id)
          if (r !== undefined && !TERMINAL.has(r.state)) { r.reason = 'lost'; this.transition(r, 'lost') }
        }
        return undefined
      case 'node-sandboxes':
        this.reconcile(m.nodeId, m.sandboxes)
        return undefined
      case 'get': {
        const r = this.records.get(m.id)
        if (r === undefined || r.tenant !== m.tenant) throw createError(ErrorCodes.NOT_FOUND, `no sandbox ${String(m.id)}`, { field: 'id' })
        return r
      }
      case 'list': {
        const limit = Math.min(m.limit ?? DirectoryDefaults.maxList, DirectoryDefaults.maxList)
        const out: SandboxRecord[] = []
        for (const r of this.records.values()) {
          if (r.tenant !== m.tenant) continue
          if (m.state !== undefined ? r.state !== m.state : m.all !== true && TERMINAL.has(r.state)) continue
          if (m.labels !== undefined && !Object.entries(m.labels).every(([k, v]) => r.labels[k] === v)) continue
          out.push(r)
          if (out.length >= limit) break
        }
        return out
      }
      case 'await-end': {
        const own = (id: string): SandboxRecord | undefined => { const r = this.records.get(id); return r?.tenant === m.tenant ? r : undefined }
        const answer = (): Array<SandboxRecord | undefined> => m.ids.map(own)
        const live = [...new Set(m.ids)].filter((id) => { const r = own(id); return r !== undefined && !TERMINAL.has(r.state) && r.state !== 'hibernated' })
        if (live.length === 0) return answer()
        const key = this.endWaits.add(live, this.ctx.defer(), answer)
        this.ctx.setTimer(`end-wait-${key}`, m.timeoutMs, { type: 'end-wait-expired', key })
        return undefined
      }
      case 'end-wait-expired':
        this.endWaits.expire(m.key)
        return undefined
      case 'set-expiry': {
        const r = this.records.get(m.id)
        if (r !== undefined && r.tenant === m.tenant && !TERMINAL.has(r.state)) r.expiresAt = m.expiresAt
        return undefined
      }
      case 'pause-state': {
        const r = this.records.get(m.id)
        if (r !== undefined && r.tenant === m.tenant) this.follow(r, m.state, m.pauseSeq, m.expiresAt)
        return undefined
      }
      case 'subscribe': {
        let set = this.subscribers.get(m.tenant)
        if (set === undefined) { set = new Set(); this.subscribers.set(m.tenant, set) }
        set.add(m.ref)
        this.ctx.watch(m.ref)
        return undefined
      }
      case 'sweep': {
        const cutoff = Date.now() - DirectoryDefaults.endedRetentionMs
        let drop = 0
        while (drop < this.ended.length) {
          // A record that lives again (restored, or brought back by its node) is no longer this list's.
          const r = this.records.get(this.ended[drop]!)
          const ended = r !== undefined && TERMINAL.has(r.state)
          if (ended && r.endedAt! >= cutoff) break
          if (ended) this.forget(r)
          drop++
        }
        this.ended = this.ended.slice(drop)
        const now = Date.now()
        for (const id of this.hibernated.ids()) {
          const r = this.records.get(id)
          if (r !== undefined && r.expiresAt <= now) { r.reason = 'ttl'; this.transition(r, 'gone') }
        }
        return undefined
      }
      case 'hibernating': {
        const r = this.records.get(m.id)
        const live = this.hibernated.admit(r, m.tenant, m.id, r !== undefined && TERMINAL.has(r.state))
        // A kill asked for while the snapshot was cut: it ends the sandbox, the hibernate does not.
        if (live.killAsked === true) throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${m.id} was killed before it could hibernate`, { id: m.id, state: 'stopping' })
        live.hibernating = m.snapshot
        return true
      }
      case 'resume-claim': {
        const r = this.records.get(m.id)
        if (r === undefined || r.tenant !== m.tenant || r.state !== 'hibernated' || this.resuming.has(m.id)) return false
        this.resuming.add(m.id)
        return true
      }
      case 'resume-release':
        this.resuming.delete(m.id)
        return undefined
      case 'hibernate-claim': {
        const r = this.records.get(m.id)
        if (r === undefined || r.tenant !== m.tenant || this.hibernateClaims.has(m.id)) return false
        this.hibernateClaims.add(m.id)
        return true
      }
      case 'hibernate-release':
        this.hibernateClaims.delete(m.id)
        return undefined
      case 'resumed': {
        this.resuming.delete(m.id)
        const r = this.records.get(m.id)
        if (r === undefined || r.tenant !== m.tenant || r.state !== 'hibernated') return false
        delete r.snapshot
        delete r.reason
        delete r.message
        Object.assign(r, { nodeId: m.nodeId, address: m.address, spec: m.spec, req: m.req })
        this.byNode.add(r.nodeId, r.id)
        this.transition(r, 'ready')
        return true
      }
      case 'killing':
        for (const id of m.ids) {
          const r = this.records.get(id)
          if (r === undefined || r.tenant !== m.tenant) continue
          delete r.hibernating
          if (!TERMINAL.has(r.state) && r.state !== 'hibernated') r.killAsked = true
          if (r.state === 'hibernated') { r.reason = 'killed'; this.transition(r, 'gone') }
        }
        return undefined
      case 'restore-claim': {
        const r = this.records.get(m.id)
        this.restoring.claim(r, m.tenant, m.id, r !== undefined && TERMINAL.has(r.state))
        return true
      }
      case 'restore-release':
        this.restoring.release(m.id)
        return undefined
      case 'restored': {
        const made = m.record
        this.restoring.release(made.id)
        const was = this.records.get(made.id)
        if (was !== undefined && (was.tenant !== made.tenant || !TERMINAL.has(was.state))) return false
        // Its old node's set must not hold it: that node's loss or return would end the new one.
        if (was !== undefined) this.byNode.delete(was.nodeId, was.id)
        this.records.set(made.id, made)
        this.byNode.add(made.nodeId, made.id)
        this.notify(made)
        return true
      }
      case 'in-use':
        return usedBy(this.records.values(), (r) => TERMINAL.has(r.state))
      case 'count':
        return this.records.size
      case 'state-counts': {
        const out: Record<string, Record<string, number>> = {}
        for (const r of this.records.values()) (out[r.state] ??= {})[r.backend] = (out[r.state]?.[r.backend] ?? 0) + 1
        return out
      }
      case 'usage': {
        // What the live sandboxes of each node were given: a restarted placement shard reserves it again.
        const out: Record<string, NodeUsage> = {}
        for (const nodeId of m.nodeIds) {
          const memoryByBackend: NonNullable<NodeUsage['memoryByBackend']> = {}
          const usage: NodeUsage = { cpus: 0, memoryMiB: 0, memoryByBackend, sandboxes: {} }
          for (const id of this.byNode.of(nodeId)) {
            const r = this.records.get(id)
            if (r === undefined || TERMINAL.has(r.state)) continue
            usage.cpus += held(r).cpus
            usage.memoryMiB += r.req.memoryMiB
            memoryByBackend[r.req.backend] = (memoryByBackend[r.req.backend] ?? 0) + r.req.memoryMiB
            usage.sandboxes[r.req.backend] = (usage.sandboxes[r.req.backend] ?? 0) + 1
          }
          out[nodeId] = usage
        }
        return out
      }
    }
  }

  onTerminated (ref: Ref, _reason: ExitReason): void {
    for (const set of this.subscribers.values()) set.delete(ref)
  }

  /**
   * A node (re)joined with the sandboxes it runs. Records of sandboxes it still runs come back
   * to `ready` (a node restart is not a sandbox's end: its reservation and quota are taken
   * again); records it no longer runs end as `lost`; sandboxes this directory never heard of
   * (the control plane restarted) get their records back.
   */
  private reconcile (nodeId: string, sandboxes: SandboxSummary[]): void {
    const running = new Set<string>()
    const shards = this.o.shards()
    for (const s of sandboxes) {
      running.add(s.id)
      let r = this.records.get(s.id)
      if (r !== undefined && r.nodeId !== nodeId) continue // another node's: not this node's to claim
      if (r === undefined) {
        r = {
          id: s.id, tenant: s.tenant, nodeId, address: s.address, state: 'lost', backend: s.spec.backend, labels: s.spec.labels,
          createdAt: s.createdAt, expiresAt: typeof s.expiresAt === 'number' ? s.expiresAt : s.createdAt + s.spec.ttlMs, req: placementRequestOf(s.spec), spec: s.spec
        }
        this.records.set(r.id, r)
        this.byNode.add(r.nodeId, r.id)
      }
      // The node's word on pauses is the truth now (a restarted agent numbers them afresh).
      const state = s.paused === true ? 'paused' : 'ready'
      r.pauseSeq = s.pauseSeq ?? 0
      if (TERMINAL.has(r.state)) {
        r.cpuFree = state === 'paused'
        shards[shardOf(nodeId, shards.length)]!.tell({ type: 'reserve', nodeId, req: held(r) })
        this.o.iam().tell({ type: 'adopt', tenant: r.tenant })
        delete r.reason
        delete r.endedAt
        r.address = s.address
        r.state = state
        this.notify(r)
      } else if ((r.state === 'ready' || r.state === 'paused') && r.state !== state) {
        // A pause or resume whose report was lost with the link.
        this.shiftCpu(r, state === 'paused')
        r.state = state
        this.notify(r)
      }
    }
    for (const id of this.byNode.of(nodeId)) {
      const r = this.records.get(id)
      if (r !== undefined && !running.has(id) && !TERMINAL.has(r.state)) { r.reason = 'lost'; this.transition(r, 'lost') }
    }
  }

  /** Gives back what a record holds: its reservation on its node and its quota. */
  private release (r: SandboxRecord): void {
    const shards = this.o.shards()
    shards[shardOf(r.nodeId, shards.length)]!.tell({ type: 'release', nodeId: r.nodeId, req: held(r) })
    this.o.iam().tell({ type: 'release', tenant: r.tenant })
  }

  /**
   * A hibernating sandbox ended on its node: it gives back its reservation and quota as an
   * ended one does, but its record stays, `hibernated`, until it resumes, is killed or its TTL ends.
   */
  private hibernate (r: SandboxRecord): void {
    this.release(r)
    this.byNode.delete(r.nodeId, r.id)
    delete r.cpuFree
    delete r.pauseSeq
    r.snapshot = r.hibernating!
    delete r.hibernating
    delete r.reason
    delete r.message
    this.hibernated.add(r)
    r.state = 'hibernated'
    this.o.hibernated?.put(r)
    this.notify(r)
    for (const key of this.endWaits.ended(r.id)) this.ctx.cancelTimer(`end-wait-${key}`)
  }

  private forget (r: SandboxRecord): void {
    this.records.delete(r.id)
    this.byNode.delete(r.nodeId, r.id)
  }

  private transition (r: SandboxRecord, state: RecordState): void {
    // A hibernated sandbox gave its reservation and quota back when it hibernated.
    const holds = r.state !== 'hibernated'
    if (!holds) { this.hibernated.delete(r); this.o.hibernated?.remove(r.id) }
    r.state = state
    if (TERMINAL.has(state)) {
      r.endedAt = Date.now()
      this.ended.push(r.id)
      if (this.ended.length > DirectoryDefaults.maxEnded) {
        const oldest = this.records.get(this.ended.shift()!)
        if (oldest !== undefined && TERMINAL.has(oldest.state)) this.forget(oldest)
      }
      if (holds) this.release(r)
    }
    this.notify(r)
    // After the releases above: whoever a waiting kill answers finds the room already free.
    if (TERMINAL.has(state)) for (const key of this.endWaits.ended(r.id)) this.ctx.cancelTimer(`end-wait-${key}`)
  }

  /** A pause or resume, from the sandbox's node or the session that asked for it: the newest (by `pauseSeq`) wins. */
  private follow (r: SandboxRecord, state: 'ready' | 'paused', pauseSeq: number, expiresAt: number | undefined): void {
    if ((r.state !== 'ready' && r.state !== 'paused') || pauseSeq <= (r.pauseSeq ?? 0)) return
    r.pauseSeq = pauseSeq
    if (expiresAt !== undefined) r.expiresAt = expiresAt
    if (r.state === state) return
    this.shiftCpu(r, state === 'paused')
    r.state = state
    this.notify(r)
  }

  /** Gives a paused sandbox's CPU share back to placement (`free`), or takes it again at its resume. */
  private shiftCpu (r: SandboxRecord, free: boolean): void {
    if ((r.cpuFree === true) === free) return
    r.cpuFree = free
    const shards = this.o.shards()
    shards[shardOf(r.nodeId, shards.length)]!.tell({ type: 'shift-cpu', nodeId: r.nodeId, cpus: free ? -r.req.cpus : r.req.cpus })
  }

  private notify (r: SandboxRecord): void {
    const notice: SandboxStateNotice = { type: 'sandbox-state', id: r.id, state: r.state, ...(r.reason !== undefined ? { reason: r.reason } : {}), ...(r.message !== undefined ? { message: r.message } : {}) }
    for (const ref of this.subscribers.get(r.tenant) ?? []) ref.tell(notice)
  }
}

/** What a record holds on its node now: all it was given, but its CPU while paused. */
function held (r: SandboxRecord): PlacementRequest {
  return r.cpuFree === true ? { ...r.req, cpus: 0 } : r.req
}

export function createDirectory (options: DirectoryOptions): () => SandboxDirectory {
  return () => new SandboxDirectory(options)
}
