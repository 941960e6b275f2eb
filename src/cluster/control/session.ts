/**
 * Session: one client connection's actor on the gateway. Every request of the SDK lands here:
 * it checks scopes, validates input, admits quota, places, creates on nodes, and forwards
 * commands to sandbox actors — never blocking on any of it (each request is answered later),
 * so one slow create does not hold up an exec on the same connection.
 */
import { Actor, type Ref } from '../../actors/index.js'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import { awaitsNode, awayError, RejoinDefaults, unknownOrAway } from './rejoin.js'
import { authorize, type IamMessage, type Principal, type Scope } from '../iam/index.js'
import type { ShardMessage } from '../placement/index.js'
import { DATA_FILE_OPS, FilesDefaults, READ_ONLY_FILE_OPS, SandboxDefaults, type FileRequest, type OutputPage, type SandboxMessage } from '../sandbox/index.js'
import { isPlainObject } from '../spec-fields.js'
import { parseSandboxSpec, type SandboxSpec } from '../spec.js'
import { resolveDeterminism } from '../spec-determinism.js'
import { ImageRefDefaults, specLayers } from '../spec-image.js'
import { createRecords, newSandboxIds } from './create.js'
import type { ControlMetrics } from '../metrics/index.js'
import type { DirectoryMessage, SandboxRecord, SandboxStateNotice } from './directory.js'
import type { ImageIndexMessage } from './image-index.js'
import { killMany, killOne, setTtl, type LifecycleDeps } from './lifecycle.js'
import { pauseOrResume } from './pause-requests.js'
import { toPublicError } from './public-error.js'
import { isClientRequestType, parseClientRequest, type ClientRequest } from './requests.js'
import type { NodeStatus, RegistryMessage } from './registry.js'
import type { SnapshotIndexMessage } from './snapshot-index.js'
import { toSnapshotView } from './snapshot-store.js'
import { fork, hibernate, hibernatedError, leasedLayers, resumeHibernated, specFromSnapshot, takeSnapshot, type SnapshotDeps } from './snapshots.js'
import { toView, type SandboxView } from './views.js'

export { toView, type SandboxView } from './views.js'
import type { TrajectoriesMessage } from '../trajectory/index.js'
import { readTrajectory, readTrajectoryBlob, type TrajectoryDeps } from './trajectory-requests.js'
import { replay } from './replay.js'
import { restore, type RestoreDeps } from './restore.js'
import { clusterStats } from './cluster-stats.js'
import type { CreationSeries } from './creation-series.js'
import type { AuditSink } from '../audit/index.js'
import { silentLogger, type Logger } from '../../log/index.js'
import { createRequestOutcomes, type RefusalLog, type RequestOutcomes } from './request-outcomes.js'

/**
 * What reaches a session: a client's message as the gateway received it (checked here, never
 * trusted), or the directory's notice about one of the tenant's sandboxes.
 */
export type SessionMessage =
  | { type: 'client', body: unknown, /** False for a tell: nobody waits for an answer. */ answer: boolean }
  | SandboxStateNotice

export const SessionDefaults = {
  /** Sandboxes one create request may ask for. */
  maxBatch: 1000,
  /** How long a create waits for capacity unless it says otherwise, and the most it may ask. */
  placementDeadlineMs: 10_000,
  maxPlacementDeadlineMs: 120_000,
  /** A read waits this long for output, plus this margin for the round trip. */
  readMarginMs: 3000,
  /** Time a file request (one chunk, a listing) gets on the node. */
  filesTimeoutMs: 60_000
}

export interface SessionOptions {
  principal: Principal
  iam: () => Ref<IamMessage>
  shards: () => Ref<ShardMessage>[]
  directory: () => Ref<DirectoryMessage>
  registry: () => Ref<RegistryMessage>
  images: () => Ref<ImageIndexMessage>
  trajectories: () => Ref<TrajectoriesMessage>
  snapshots: () => Ref<SnapshotIndexMessage>
  /** Where notices for the client go (the link's tell towards the SDK). */
  notify: (notice: SandboxStateNotice) => void
  /** The control plane's recent creations (the page's charts): this session's creates are counted in it. */
  creations?: CreationSeries
  /** The audit log (none: nothing is audited, and `audit-query` answers an empty page). */
  audit?: AuditSink
  /** Where refused requests are logged (none: silent). */
  log?: Logger
  /** The gateway's refusal log, shared by its sessions (none: the session's own, on `log`). */
  refusals?: RefusalLog
  /** Counts creations and refused requests (none: not counted). */
  metrics?: ControlMetrics
}

export class Session extends Actor<SessionMessage> {
  private readonly tenant: string
  private chunksInFlight = 0
  private readonly outcomes: RequestOutcomes

  constructor (private readonly o: SessionOptions) {
    super()
    this.tenant = o.principal.tenant
    this.outcomes = createRequestOutcomes({
      principal: o.principal, log: o.log ?? silentLogger(), ...(o.audit !== undefined ? { audit: o.audit } : {}), ...(o.refusals !== undefined ? { refusals: o.refusals } : {})
    })
  }

  preStart (): void {
    this.o.directory().tell({ type: 'subscribe', tenant: this.tenant, ref: this.self })
  }

  /**
   * Never throws, and never leaves a rejection unhandled: whatever a client sends, a request is
   * answered (a public error at worst) and a tell that cannot be acted on is a dead letter. The
   * session, and every later request on its connection, live on.
   */
  receive (m: SessionMessage): unknown {
    if (m.type === 'sandbox-state') {
      this.o.notify(m)
      return undefined
    }
    const work = this.handle(m.body)
    if (m.answer) {
      this.ctx.answerLater(work.catch((err: unknown) => { throw this.refused(m.body, toPublicError(err)) }))
    } else {
      work.catch(() => this.ctx.system.deadLetter(this.self.address, { message: m.body, sender: undefined, reply: undefined }, 'dropped'))
    }
    return undefined
  }

  /**
   * Checks one client message and does what it asks; every failure, early or late, is the
   * promise's. Every outcome passes `outcomes`: refusals are logged, audited types audited.
   */
  private async handle (body: unknown): Promise<unknown> {
    const startedAt = Date.now()
    let m: ClientRequest | undefined
    try {
      m = parseClientRequest(body)
      const result = await this.dispatch(m)
      this.outcomes.ok(m, result, startedAt)
      return result
    } catch (err) {
      throw this.outcomes.refused(body, m, err, startedAt)
    }
  }

  private async dispatch (m: ClientRequest): Promise<unknown> {
    switch (m.type) {
      case 'create':
        this.authorize('sandbox:create')
        return await this.create(m)
      case 'info':
        this.authorize('sandbox:read')
        return toView(await this.record(m.id))
      case 'list':
        this.authorize('sandbox:read')
        return (await this.o.directory().ask<SandboxRecord[]>({
          type: 'list', tenant: this.readTenant(m.tenant),
          ...(m.labels !== undefined ? { labels: m.labels } : {}),
          ...(m.state !== undefined ? { state: m.state } : {}),
          ...(m.all !== undefined ? { all: m.all } : {}),
          ...(m.limit !== undefined ? { limit: m.limit } : {})
        })).map(toView)
      case 'kill':
        this.authorize('sandbox:exec')
        if ('id' in m) return toView(await killOne(this.lifecycle(), await this.record(m.id)))
        return await killMany(this.lifecycle(), m)
      case 'set-ttl':
        this.authorize('sandbox:exec')
        return toView(await setTtl(this.lifecycle(), await this.record(m.id), m.ttlMs))
      case 'pause': {
        this.authorize('sandbox:exec')
        const r = await this.record(m.id)
        if (r.state === 'hibernated') throw hibernatedError(r)
        return toView(await pauseOrResume(this.lifecycle(), r, 'pause'))
      }
      case 'resume': {
        this.authorize('sandbox:exec')
        const r = await this.record(m.id)
        // A hibernated sandbox is created again from its snapshot; a paused one thaws.
        if (r.state === 'hibernated') return await resumeHibernated(this.deps(), r, this.deadline(undefined))
        return toView(await pauseOrResume(this.lifecycle(), r, 'resume'))
      }
      case 'exec':
        this.authorize('sandbox:exec')
        return await this.forward<OutputPage>(m.id, { type: 'exec', execId: m.execId, argv: m.argv, ...(m.opts !== undefined ? { opts: m.opts } : {}) }, SessionDefaults.readMarginMs + 2000)
      case 'read':
        this.authorize('sandbox:exec')
        return await this.forward<OutputPage>(m.id, {
          type: 'read', execId: m.execId, fromSeq: m.fromSeq,
          ...(m.maxBytes !== undefined ? { maxBytes: m.maxBytes } : {}),
          ...(m.waitMs !== undefined ? { waitMs: m.waitMs } : {})
        }, Math.min(m.waitMs ?? 2000, SandboxDefaults.maxReadWaitMs) + SessionDefaults.readMarginMs)
      case 'exec-kill':
        this.authorize('sandbox:exec')
        return await this.forward(m.id, { type: 'exec-kill', execId: m.execId })
      case 'exec-resize':
        this.authorize('sandbox:exec')
        return await this.forward(m.id, { type: 'exec-resize', execId: m.execId, cols: m.cols, rows: m.rows })
      case 'stdin':
        this.authorize('sandbox:exec')
        return await this.forward(m.id, {
          type: 'stdin', execId: m.execId, offset: m.offset,
          ...(m.data !== undefined ? { data: m.data } : {}),
          ...(m.eof !== undefined ? { eof: m.eof } : {})
        })
      case 'trajectory':
        this.authorize('sandbox:read')
        return await readTrajectory({ ...this.trajectoryDeps(), tenant: this.readTenant(m.tenant) }, m)
      case 'trajectory-blob':
        this.authorize('sandbox:read')
        return await readTrajectoryBlob({ ...this.trajectoryDeps(), tenant: this.readTenant(m.tenant) }, m)
      case 'files':
        this.authorize(READ_ONLY_FILE_OPS.includes(m.req.op) ? 'sandbox:read' : 'sandbox:exec')
        return await this.files(m.id, m.req)
      case 'token-create':
        this.authorize('admin')
        return await this.o.iam().ask({ type: 'create-key', tenant: m.tenant, scopes: m.scopes, ...(m.expiresInMs !== undefined ? { expiresInMs: m.expiresInMs } : {}) })
      case 'token-list':
        this.authorize('admin')
        return await this.o.iam().ask({ ...m, type: 'list-keys' })
      case 'token-revoke':
        this.authorize('admin')
        if (!await this.o.iam().ask<boolean>({ type: 'revoke-key', keyId: m.id })) throw createError(ErrorCodes.NOT_FOUND, `no key ${m.id}`, { field: 'id' })
        return { id: m.id, revoked: true }
      case 'admin-rotate':
        this.authorize('admin')
        return await this.o.iam().ask({ type: 'rotate-admin' })
      case 'tenant-list':
        this.authorize('admin')
        return await this.o.iam().ask({ type: 'list-tenants' })
      case 'tenant-quotas':
        this.authorize('admin')
        return await this.o.iam().ask(m.quotas === undefined ? { type: 'get-quotas', tenant: m.tenant } : { type: 'set-quotas', tenant: m.tenant, quotas: m.quotas })
      case 'nodes':
        this.authorize('admin')
        return await this.o.registry().ask<NodeStatus[]>({ type: 'nodes' })
      case 'cluster-stats':
        this.authorize('admin')
        return await clusterStats({ registry: this.o.registry, directory: this.o.directory, ...(this.o.creations !== undefined ? { creations: this.o.creations } : {}) }, m.windowSec)
      case 'image-tag':
        this.authorize('admin')
        return await this.o.images().ask({ type: 'tag', name: m.name, digest: m.digest, kind: m.kind })
      case 'image-list':
        this.authorize('sandbox:read')
        return await this.o.images().ask({ type: 'list' })
      case 'snapshot':
        this.authorize('sandbox:exec')
        return toSnapshotView(await takeSnapshot(this.deps(), await this.record(m.id), m.name, m.memory === true))
      case 'snapshots':
        this.authorize('sandbox:read')
        return await this.o.snapshots().ask({ ...m, type: 'list', tenant: this.tenant })
      case 'snapshot-delete':
        this.authorize('sandbox:exec')
        return await this.o.snapshots().ask({ type: 'delete', tenant: this.tenant, ref: m.id })
      case 'fork':
        this.authorize('sandbox:exec')
        return await fork(this.deps(), m, this.deadline(m.deadlineMs))
      case 'hibernate':
        this.authorize('sandbox:exec')
        return await hibernate(this.deps(), m.id)
      case 'replay':
        this.authorize('sandbox:create')
        return await replay(this.replayDeps(), m)
      case 'restore':
        this.authorize('sandbox:create')
        return await restore(this.replayDeps(), m.id)
      case 'audit-query':
        this.authorize('admin')
        return await this.o.audit?.query(m.query) ?? { records: [], truncated: false }
    }
  }

  private trajectoryDeps (): TrajectoryDeps {
    return { tenant: this.tenant, directory: this.o.directory, trajectories: this.o.trajectories, refFor: (address) => this.ctx.system.refFor<SandboxMessage>(address) }
  }

  private deps (): SnapshotDeps {
    return {
      tenant: this.tenant, iam: this.o.iam, shards: this.o.shards, directory: this.o.directory, snapshots: this.o.snapshots,
      ...(this.o.creations !== undefined ? { creations: this.o.creations } : {}),
      ...(this.o.metrics !== undefined ? { metrics: this.o.metrics } : {}),
      refFor: (address) => this.ctx.system.refFor(address),
      record: (id) => this.record(id),
      forward: (id, message, timeoutMs) => this.forward(id, message, timeoutMs),
      // A resumed sandbox's trajectory goes on where it stopped, when the control plane keeps them.
      nextSeq: async (id) => await this.o.trajectories().ask<number>({ type: 'next-seq', sandboxId: id }, { timeoutMs: 10_000 }).catch(() => undefined)
    }
  }

  private replayDeps (): RestoreDeps {
    return { ...this.deps(), trajectories: this.o.trajectories }
  }

  /** When a create's placement gives up: `deadlineMs` from now, checked against its bounds. */
  private deadline (deadlineMs: number | undefined): number {
    const waitMs = deadlineMs ?? SessionDefaults.placementDeadlineMs
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > SessionDefaults.maxPlacementDeadlineMs) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `deadlineMs must be an integer in [0, ${SessionDefaults.maxPlacementDeadlineMs}]`, { field: 'deadlineMs' })
    }
    return Date.now() + waitMs
  }

  private lifecycle (): LifecycleDeps {
    return { tenant: this.tenant, directory: this.o.directory, refFor: (address) => this.ctx.system.refFor<SandboxMessage>(address) }
  }

  /**
   * Forwards a file request. Those carrying or fetching a chunk are bounded in flight per
   * connection (`FilesDefaults.maxInflightChunks`), so a client cannot pile chunks up in the cluster.
   * @throws WARREN_ERR_OVERLOADED with retryAfterMs beyond the bound
   */
  private async files (id: string, req: FileRequest): Promise<unknown> {
    const data = DATA_FILE_OPS.includes(req.op)
    if (data && this.chunksInFlight >= FilesDefaults.maxInflightChunks) {
      throw createError(ErrorCodes.OVERLOADED, `${this.chunksInFlight} file chunks are in flight on this connection`, { retryAfterMs: 50 })
    }
    if (data) this.chunksInFlight++
    try {
      return await this.forward(id, { type: 'files', req }, SessionDefaults.filesTimeoutMs)
    } finally {
      if (data) this.chunksInFlight--
    }
  }

  private authorize (scope: Scope): void {
    authorize(this.o.principal, scope)
  }

  /** The tenant a read is for: the key's own, or one an admin names (FORBIDDEN naming `admin` for any other key). */
  private readTenant (tenant: string | undefined): string {
    if (tenant === undefined || tenant === this.tenant) return this.tenant
    this.authorize('admin')
    return tenant
  }

  /** Counts a refused request by its type (when the session knows it) and code; returns the error. */
  private refused (body: unknown, err: WarrenError): WarrenError {
    const type = (body as { type?: unknown } | null)?.type
    this.o.metrics?.refusedRequest(isClientRequestType(type) ? type : undefined, err.code)
    return err
  }

  /** The tenant's record of a sandbox; another tenant's id is NOT_FOUND, like a missing one. */
  private record (id: unknown): Promise<SandboxRecord> {
    if (typeof id !== 'string' || id.length === 0 || id.length > 64) return Promise.reject(createError(ErrorCodes.NOT_FOUND, `no sandbox ${String(id)}`, { field: 'id' }))
    return this.o.directory().ask<SandboxRecord>({ type: 'get', tenant: this.tenant, id })
  }

  /** Sends a message to a sandbox actor on its node, after checking the tenant owns it. */
  private async forward<R = unknown> (id: string, message: SandboxMessage, timeoutMs = 10_000): Promise<R> {
    // A read waits out a node that is away (rejoin.ts): the command's output resumes after.
    const reading = message.type === 'read'
    const r = await this.record(id).catch(async (err: unknown) => {
      throw reading ? await unknownOrAway(err, id, async () => await this.o.trajectories().ask<boolean>({ type: 'open', tenant: this.tenant, sandboxId: id }, { timeoutMs: 5000 })) : err
    })
    if (reading && awaitsNode(r)) throw awayError(id)
    if (r.state === 'gone' || r.state === 'failed' || r.state === 'lost') {
      throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${id} is ${r.state}${r.reason !== undefined ? ` (${r.reason})` : ''}`, { id, state: r.state, ...(r.reason !== undefined ? { reason: r.reason } : {}) })
    }
    if (r.state === 'hibernated') throw hibernatedError(r)
    const ref = this.ctx.system.refFor<SandboxMessage>(r.address)
    if (ref === undefined && reading && RejoinDefaults.durableBackends.includes(r.backend)) throw awayError(id)
    if (ref === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the node of sandbox ${id} is not connected`, { id, state: 'lost' })
    try {
      return await ref.ask<R>(message, { timeoutMs })
    } catch (err) {
      // The record said ready, but its actor is gone: the sandbox ended on the way.
      throw toPublicError(err, id)
    }
  }

  private async create (m: Extract<ClientRequest, { type: 'create' }>): Promise<SandboxView | SandboxView[]> {
    // Everything the request says is checked before anything is reserved or placed.
    const count = m.count ?? 1
    if (!Number.isInteger(count) || count < 1 || count > SessionDefaults.maxBatch) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `count must be an integer in [1, ${SessionDefaults.maxBatch}]`, { field: 'count' })
    }
    const deadline = this.deadline(m.deadlineMs)
    // Resolved once for the whole batch: its sandboxes share one seed, as they share the spec.
    const spec = resolveDeterminism(isPlainObject(m.spec) && m.spec.snapshot !== undefined
      ? await specFromSnapshot(this.deps(), m.spec)
      : await this.resolveImages(parseSandboxSpec(m.spec)))
    let outcomes: Awaited<ReturnType<typeof createRecords>>
    try {
      await this.o.iam().ask({ type: 'admit', tenant: this.tenant, n: count })
      outcomes = await createRecords(this.deps(), spec, newSandboxIds(count), deadline)
    } finally {
      // Its sandboxes are in the directory now (or were not made): the collector may look again.
      if (spec.snapshot !== undefined) this.o.snapshots().tell({ type: 'unlease', layers: leasedLayers(spec) })
    }
    const records = outcomes.filter((o): o is SandboxRecord => !(o instanceof Error))
    const firstError = outcomes.find((o): o is Error => o instanceof Error)
    if (firstError !== undefined) {
      // All or nothing: a batch that cannot be created whole is not left half made, and the
      // error comes once what was made is gone, so a retry finds its room.
      if (records.length > 0) await killMany(this.lifecycle(), { ids: records.map((r) => r.id) }).catch(() => {})
      throw firstError
    }
    const views = records.map(toView)
    return m.count === undefined ? views[0]! : views
  }

  /**
   * Turns image names (`name:tag`) into digests, so placement and nodes see digests only, and
   * has the index refuse a name it lacks or a digest its blob store lacks, naming the field.
   */
  private async resolveImages (spec: SandboxSpec): Promise<SandboxSpec> {
    if (spec.image === undefined) return spec
    const { workspace, tools = [] } = spec.image
    const refs = specLayers(spec.image)
    if (refs.every((r) => r.ref === ImageRefDefaults.builtinBase)) return spec
    const [b, ...rest] = await this.o.images().ask<string[]>({ type: 'resolve', refs })
    return {
      ...spec,
      image: { base: b!, ...(workspace !== undefined ? { workspace: rest.shift()! } : {}), ...(tools.length > 0 ? { tools: rest } : {}) }
    }
  }
}

export function createSession (options: SessionOptions): () => Session {
  return () => new Session(options)
}
