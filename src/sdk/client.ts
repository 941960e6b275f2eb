/**
 * The client a trainer imports. One WebSocket link to a gateway, which reconnects on its own
 * (resuming the same session), and an actor system on the trainer's side that holds one actor
 * per sandbox handle.
 *
 *   const client = await connect({ url, token })
 *   const sb = await client.create({ backend: 'function' })
 *   const r = await sb.exec(['js', 'console.log(6*7)'])
 */
import { nanoid } from 'nanoid'
import { ActorSystem } from '../actors/index.js'
import { CLIENT_ADDRESS, LifecycleDefaults, SESSION_ADDRESS, type AuditPage, type AuditQuery, type ClientRequest, type ClusterStats, type KillOutcome, type Quotas, type RecordedBytes, type SandboxStateNotice, type SandboxView, type Step, type TrajectoryPage } from '../cluster/index.js'
import { createError, ErrorCodes, isWarrenError, type WarrenError } from '../errors.js'
import { createLinkClient, loadCa, type CaInput, type LinkClient, type LinkOptionsInput } from '../transport/index.js'
import { resolveConfig } from './config.js'
import { rateLimitPause, requestError } from './request-errors.js'
import type { ExecTransport } from './exec.js'
import { Sandbox, SandboxHandleActor, type HandleMessage } from './sandbox.js'
import { resumeOf, type SnapshotFilter, type SnapshotView } from './snapshots.js'
import { startWorkerClient, type WorkerClient } from './worker.js'
import { allSteps, readTrajectory, recordedBytes, type TrajectoryReadOptions } from './trajectory.js'
import { replayOf, restoreOf, type ReplayOptions, type Replayed, type Restored } from './replay.js'
import { createToken, listTokens, revokeToken, rotateAdminKey, setQuotas, type KeyView, type TokenOptions } from './admin.js'

export interface ConnectOptions {
  /** Gateway URL; default WARREN_URL, then ~/.warren/config.json. */
  url?: string
  /** API key; default WARREN_TOKEN, then ~/.warren/config.json. */
  token?: string
  /**
   * The CA of a `wss://` control plane whose certificate the system does not trust: PEM text or
   * a PEM file's path (default WARREN_CA, then ~/.warren/config.json). Trusted beside the
   * system's roots; a certificate it does not vouch for fails the connect at once with
   * WARREN_ERR_CONNECTION_CLOSED (`details.reason: 'tls'`).
   */
  ca?: CaInput
  /** How long the first connection may take. */
  connectTimeoutMs?: number
  /** Default time limit of a request. */
  requestTimeoutMs?: number
  /**
   * How long a request the tenant's request or creation rate refused (`WARREN_ERR_QUOTA` with
   * `details.quota` `requests` or `rate`) is sent again, each time after its `retryAfterMs`; past
   * it the refusal is thrown. Such a request was not handled, so this is safe for any request.
   * Default 30 s; 0 throws the first refusal.
   */
  rateLimitWaitMs?: number
  link?: LinkOptionsInput
}

/** A sandbox spec as the SDK takes it (validated by the control plane). */
export interface CreateSpec {
  backend?: 'function' | 'container' | 'microvm' | 'fullvm'
  ttlMs?: number
  idleTimeoutMs?: number
  labels?: Record<string, string>
  limits?: { cpus?: number, memoryMiB?: number, diskMiB?: number, pids?: number }
  env?: Record<string, string>
  image?: { base: string, workspace?: string, tools?: string[] }
  /**
   * Start from a snapshot (its id `snap-…` or name `name:tag`): its files, and its spec with the
   * fields given here laid over it (labels, env and limits merged key by key). No `image` beside it.
   */
  snapshot?: string
  /** Hosts the sandbox may reach through its egress proxy (container and microvm; `pypi.org`, `*.pythonhosted.org`, `host:port`). */
  network?: { egress: string[] }
  /** False: time spent paused does not count against `ttlMs` (the end moves on at resume). Default true. */
  pausedTtl?: boolean
  /**
   * The same world in every sandbox of this spec: hostname, TZ, LANG/LC_ALL, SOURCE_DATE_EPOCH,
   * WARREN_SEED and PYTHONHASHSEED (`true`: sandbox, UTC, C.UTF-8, 0 and a seed drawn at create).
   */
  deterministic?: true | { hostname?: string, tz?: string, lang?: string, sourceDateEpoch?: number, seed?: number }
  /** How long to wait for capacity before WARREN_ERR_NO_CAPACITY. */
  deadlineMs?: number
}

/** What `list` shows: live sandboxes unless `all` or a `state` says otherwise. */
export interface ListFilter {
  labels?: Record<string, string>
  state?: SandboxView['state']
  /** Ended sandboxes too (the control plane keeps them a few minutes). */
  all?: boolean
  limit?: number
}

/** A promise and the function that resolves it (Promise.withResolvers, which Node 20 lacks). */
function openSignal (): { promise: Promise<void>, resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => { resolve = r })
  return { promise, resolve }
}

export const ClientDefaults = { connectTimeoutMs: 10_000, requestTimeoutMs: 30_000, rateLimitWaitMs: 30_000 }

export class Client {
  private readonly system = new ActorSystem({ name: `sdk-${nanoid(8)}` })
  private readonly handles = new Map<string, Sandbox>()
  /** Resolved at the next 'open' of the link and then replaced: one promise however many wait (a long command's pulls would otherwise pile up a waiter each). */
  private nextOpen = openSignal()
  private isClosed = false
  /** Set when the control plane ended the session because the key stopped working (revoked, expired). */
  private refusedBy: WarrenError | undefined
  private readonly transport: ExecTransport

  private constructor (readonly link: LinkClient, private readonly requestTimeoutMs: number, private readonly rateLimitWaitMs: number, private readonly config: { url: string, token: string, ca?: string }) {
    this.transport = {
      request: (message, timeoutMs) => this.send(message, timeoutMs),
      reconnected: () => this.nextOpen.promise,
      closed: () => this.isClosed
    }
    link.on('close', (reason?: unknown) => {
      if (isWarrenError(reason) && reason.code === ErrorCodes.UNAUTHENTICATED) this.refusedBy = reason
    })
    link.on('open', () => {
      const opened = this.nextOpen
      this.nextOpen = openSignal()
      opened.resolve()
    })
  }

  /** @internal use `connect` */
  static async open (options: ConnectOptions = {}): Promise<Client> {
    const { url, token, ca: caInput } = resolveConfig({
      ...(options.url !== undefined ? { url: options.url } : {}),
      ...(options.token !== undefined ? { token: options.token } : {}),
      ...(options.ca !== undefined ? { ca: typeof options.ca === 'string' ? options.ca : options.ca.toString('utf8') } : {})
    })
    const ca = caInput !== undefined ? loadCa(caInput) : undefined
    let client: Client | undefined
    const link = createLinkClient({
      ...(options.link ?? {}),
      url,
      token,
      ...(ca !== undefined ? { ca } : {}),
      handler: {
        tell: (to, message) => { if (to === CLIENT_ADDRESS) client?.onNotice(message as SandboxStateNotice) }
      }
    })
    client = new Client(link, options.requestTimeoutMs ?? ClientDefaults.requestTimeoutMs, options.rateLimitWaitMs ?? ClientDefaults.rateLimitWaitMs, { url, token, ...(ca !== undefined ? { ca } : {}) })
    const timeoutMs = options.connectTimeoutMs ?? ClientDefaults.connectTimeoutMs
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        link.connect(),
        new Promise((_resolve, reject) => {
          timer = setTimeout(() => reject(createError(ErrorCodes.CONNECTION_CLOSED, `could not reach ${url} within ${timeoutMs} ms`)), timeoutMs)
        })
      ])
    } catch (err) {
      link.close()
      await client.system.shutdown(0)
      throw err
    } finally {
      clearTimeout(timer)
    }
    return client
  }

  /** Creates one sandbox and waits until it is ready. */
  async create (spec: CreateSpec = {}): Promise<Sandbox> {
    const { deadlineMs, ...rest } = spec
    const view = await this.request<SandboxView>({ type: 'create', spec: rest, ...(deadlineMs !== undefined ? { deadlineMs } : {}) }, (deadlineMs ?? 10_000) + this.requestTimeoutMs)
    return this.handleFor(view)
  }

  /**
   * Creates `count` sandboxes of one spec in one request (batched on the wire). All or nothing:
   * when any cannot be made, none is left behind and the first error is thrown.
   */
  async createMany (count: number, spec: CreateSpec = {}): Promise<Sandbox[]> {
    const { deadlineMs, ...rest } = spec
    const views = await this.request<SandboxView[]>({ type: 'create', spec: rest, count, ...(deadlineMs !== undefined ? { deadlineMs } : {}) }, (deadlineMs ?? 10_000) + this.requestTimeoutMs * 2)
    return views.map((v) => this.handleFor(v))
  }

  /**
   * Finds a sandbox again by id (e.g. after a restart of the trainer). A hibernated one is
   * resumed first (created again from its snapshot, same id).
   */
  async attach (id: string): Promise<Sandbox> {
    let view = await this.request<SandboxView>({ type: 'info', id })
    if (view.state === 'hibernated') view = await resumeOf(this.transport, id)
    const handle = this.handleFor(view)
    handle.ref.tell({ type: 'sandbox-state', id, state: view.state })
    return handle
  }

  /** The tenant's snapshots, newest first (of one sandbox with `sandboxId`). */
  async snapshots (filter: SnapshotFilter = {}): Promise<SnapshotView[]> {
    return await this.request<SnapshotView[]>({ type: 'snapshots', ...filter })
  }

  /**
   * Deletes a snapshot (by id or name). Its layers leave the blob store once no other snapshot
   * and no sandbox uses them; sandboxes made from it live on.
   * @throws WARREN_ERR_NOT_FOUND naming `id` for one the tenant has not
   */
  async deleteSnapshot (idOrName: string): Promise<{ id: string, deleted: true }> {
    return await this.request<{ id: string, deleted: true }>({ type: 'snapshot-delete', id: idOrName })
  }

  /**
   * The tenant's live sandboxes, filtered by labels; ended ones (gone, failed, lost, kept a few
   * minutes) too with `all: true`, or only those in `state`.
   */
  async list (filter: ListFilter = {}): Promise<SandboxView[]> {
    return await this.request<SandboxView[]>({ type: 'list', ...filter })
  }

  /**
   * Kills many sandboxes: those named by id (at most `LifecycleDefaults.maxKill`, 1,000, in one
   * request), or every live one carrying all of `labels` (1,000 a request: asked again while a
   * request ends that many). Resolves once each has ended and its capacity is free again.
   * @returns one outcome per sandbox, in the order named: `ok` (and `killed`, false when it had
   *   ended before), or an `error`: WARREN_ERR_NOT_FOUND for an id this tenant has not (another
   *   tenant's is left alone), WARREN_ERR_TIMEOUT for one that did not end in time
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `ids` or `labels` (empty, too many)
   */
  async kill (target: string[] | { labels: Record<string, string> }): Promise<KillOutcome[]> {
    if (Array.isArray(target)) return await this.killOnce({ ids: target })
    const all: KillOutcome[] = []
    for (;;) {
      const page = await this.killOnce({ labels: target.labels })
      all.push(...page)
      // A full page may have left more behind; a page that killed none would only repeat itself.
      if (page.length < LifecycleDefaults.maxKill || !page.some((o) => o.ok && o.killed)) return all
    }
  }

  private async killOnce (target: { ids: string[] } | { labels: Record<string, string> }): Promise<KillOutcome[]> {
    const outcomes = await this.request<KillOutcome[]>({ type: 'kill', ...target }, LifecycleDefaults.endWaitMs + LifecycleDefaults.marginMs * 2)
    for (const o of outcomes) if (o.ok) this.handles.get(o.id)?.ended({ state: o.state, ...(o.reason !== undefined ? { reason: o.reason } : {}) })
    return outcomes
  }

  /**
   * A page of a sandbox's trajectory (its header from seq 0, then its steps), also after the
   * sandbox has ended (until the cluster's retention, 7 days by default).
   * @throws WARREN_ERR_NOT_FOUND for a sandbox this tenant never had
   */
  async trajectory (id: string, opts: TrajectoryReadOptions = {}): Promise<TrajectoryPage> {
    return await readTrajectory(this.transport, id, opts)
  }

  /** Every step of a sandbox's trajectory recorded so far, in order (it pages for you). */
  steps (id: string): AsyncGenerator<Step> {
    return allSteps(this.transport, id)
  }

  /**
   * All the bytes a step of sandbox `id` recorded (`step.stdout`, `step.content`, …): inline, or
   * fetched from the blob store in ranges (`trajectory-blob`).
   * @returns undefined when they were not kept whole (the sandbox's record budget was spent: only head, tail, count and sha256)
   */
  async recorded (id: string, bytes: RecordedBytes): Promise<Uint8Array | undefined> {
    return await recordedBytes(this.transport, id, bytes)
  }

  /**
   * Replays what sandbox `id` did (its trajectory) in a fresh sandbox: the recorded spec (the
   * same layers, hostname, TZ, SOURCE_DATE_EPOCH and seed), each step applied in order up to
   * `upTo`, each command compared with what it recorded, stopping at the first that diverges.
   * The fresh sandbox is kept (`result.sandbox`); it has a trajectory of its own.
   * @throws WARREN_ERR_NOT_FOUND for a sandbox this tenant never had; INVALID_ARGUMENT naming a bad option
   */
  async replay (id: string, opts: ReplayOptions = {}): Promise<Replayed<Sandbox>> {
    return await replayOf(this.transport, id, opts, (v) => this.handleFor(v))
  }

  /**
   * Makes a sandbox whose node was lost (or that ended) again under its id: from its newest
   * snapshot, or its recorded spec, with the steps after it applied again and compared.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `id` for a live or hibernated sandbox
   */
  async restore (id: string): Promise<Restored<Sandbox>> {
    const r = await restoreOf(this.transport, id, (v) => this.handleFor(v))
    r.sandbox.ref.tell({ type: 'sandbox-state', id, state: 'ready' })
    return r
  }

  /** Admin: issues an API key for a tenant (shown once); `expiresInMs` gives it a life (1 s to 10 years). */
  async createToken (tenant: string, scopes: string[], opts: TokenOptions = {}): Promise<string> {
    return await createToken(this.admin, tenant, scopes, opts)
  }

  /** Admin: every API key (of one tenant with `tenant`), in id order: ids, scopes and times, never a secret. */
  async tokens (filter: { tenant?: string } = {}): Promise<KeyView[]> {
    return await listTokens(this.admin, filter)
  }

  /**
   * Admin: revokes a key by its id; sessions open with it are closed at once.
   * @throws WARREN_ERR_NOT_FOUND naming `id` for no such key; INVALID_ARGUMENT naming `id` for the admin key (rotate it)
   */
  async revokeToken (id: string): Promise<{ id: string, revoked: true }> {
    return await revokeToken(this.admin, id)
  }

  /** Admin: a new admin key; the old one stops working (a client on it is closed once this answers). */
  async rotateAdminKey (): Promise<string> {
    return await rotateAdminKey(this.admin)
  }

  /**
   * Admin: sets a tenant's quotas (those given; a new tenant gets the defaults for the rest),
   * applied from its next create: sandboxes running over a lowered maximum keep running.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `quotas.<name>` out of its bounds
   */
  async setQuotas (tenant: string, quotas: Partial<Quotas>): Promise<Quotas> {
    return await setQuotas(this.admin, tenant, quotas)
  }

  private readonly admin = <R>(message: ClientRequest): Promise<R> => this.request<R>(message)

  /** Admin: every tenant and its quotas. */
  async tenants (): Promise<Array<{ tenant: string, quotas: Quotas }>> {
    return await this.request<Array<{ tenant: string, quotas: Quotas }>>({ type: 'tenant-list' })
  }

  /**
   * Admin: a tenant's quotas; with `quotas`, sets those given first (creating the tenant).
   * @throws WARREN_ERR_NOT_FOUND (field `tenant`) when reading a tenant that does not exist
   */
  async quotas (tenant: string, quotas?: Partial<Quotas>): Promise<Quotas> {
    return await this.request<Quotas>({ type: 'tenant-quotas', tenant, ...(quotas !== undefined ? { quotas } : {}) })
  }

  /** Admin: the nodes and their health. */
  async nodes (): Promise<unknown[]> {
    return await this.request<unknown[]>({ type: 'nodes' })
  }

  /**
   * Admin: the figures the live page shows — nodes with capacity and use, layer caches, and the
   * creations of the last `windowSec` seconds (1 to 600, default 600), one point a second.
   */
  async clusterStats (windowSec?: number): Promise<ClusterStats> {
    return await this.request<ClusterStats>({ type: 'cluster-stats', ...(windowSec !== undefined ? { windowSec } : {}) })
  }

  /**
   * Admin: the newest audit records matching the filters (at most `limit`, 1–1,000, default
   * 100), oldest first; `truncated` when older ones matched too (narrow `since`/`until` to see them).
   */
  async audit (query: AuditQuery = {}): Promise<AuditPage> {
    return await this.request<AuditPage>({ type: 'audit-query', ...query } as unknown as ClientRequest)
  }

  /** Sends one request to the session. */
  request<R> (message: ClientRequest, timeoutMs = this.requestTimeoutMs): Promise<R> {
    return this.send<R>(message, timeoutMs)
  }

  private async send<R> (message: unknown, timeoutMs: number): Promise<R> {
    const waitUntil = Date.now() + this.rateLimitWaitMs
    for (;;) {
      // A session the control plane ended for its key says why, not just that the link is closed.
      if (this.refusedBy !== undefined) throw this.refusedBy
      try {
        return await this.link.request<R>(SESSION_ADDRESS, message, { timeoutMs })
      } catch (err) {
        // Refused for the tenant's rate, so not handled: sent again when the cluster says, for a while.
        const pause = rateLimitPause(err)
        if (pause !== undefined && !this.isClosed && Date.now() + pause <= waitUntil) {
          await new Promise((resolve) => setTimeout(resolve, pause))
          continue
        }
        const type = (message as { type?: unknown } | null)?.type
        throw requestError(err, typeof type === 'string' ? type : 'unknown', this.config.url)
      }
    }
  }

  /**
   * Runs a second client, for the same control plane and key, in a worker thread (comlink), so
   * the calling thread never blocks on it. `terminate()` ends it.
   */
  async worker (): Promise<WorkerClient> {
    return await startWorkerClient(this.config.url, this.config.token, this.config.ca)
  }

  /** Closes the connection. Sandboxes live on until their TTL or a kill. */
  async close (): Promise<void> {
    this.isClosed = true
    this.link.close()
    await this.system.shutdown(0)
  }

  private handleFor (view: SandboxView): Sandbox {
    const known = this.handles.get(view.id)
    if (known !== undefined) return known
    const actor = new SandboxHandleActor(view, () => { if (this.handles.get(view.id) === handle) this.handles.delete(view.id) })
    const ref = this.system.spawn<HandleMessage>(() => actor, { name: `sb-${view.id}`, mailbox: { capacity: 64, overflow: 'drop-oldest' } })
    const handle = new Sandbox(this.transport, actor, ref, (v) => this.handleFor(v))
    this.handles.set(view.id, handle)
    return handle
  }

  private onNotice (notice: SandboxStateNotice): void {
    const handle = this.handles.get(notice.id)
    if (handle === undefined) return
    handle.ref.tell(notice) // the handle's actor ends itself when the sandbox has ended, and is forgotten then
  }
}

/**
 * Connects to a control plane.
 * @param options url and token (default WARREN_URL / WARREN_TOKEN, then ~/.warren/config.json)
 */
export function connect (options: ConnectOptions = {}): Promise<Client> {
  return Client.open(options)
}
