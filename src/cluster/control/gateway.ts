/**
 * Gateway: the control plane's WebSocket server. Every connection authenticates first: a user
 * key (`wrn_…`) gets a Session actor (a temporary child: it ends with its connection, the
 * sandboxes it made do not); a node join token (`wrnj_…`) gets a node link that may reach
 * only the registry, the directory and the trajectory store. Nodes are reached back through their links by address
 * (`${nodeId}/…`).
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Actor, type Ref } from '../../actors/index.js'
import type { UploadTunables } from '../../images/upload/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { createLinkServer, createPortServer, exposeSystem, routeRemote, servesTls, type Link, type LinkHandler, type LinkOptionsInput, type LinkServer, type TlsServerConfig } from '../../transport/index.js'
import { keyIdOf, type IamMessage, type Principal } from '../iam/index.js'
import type { ShardMessage } from '../placement/index.js'
import { createBlobRoutes, type BlobRoutes } from './blob-routes.js'
import type { DirectoryMessage } from './directory.js'
import type { ImageIndexMessage } from './image-index.js'
import type { RegistryMessage } from './registry.js'
import type { TrajectoriesMessage } from '../trajectory/index.js'
import { toPublicError } from './public-error.js'
import { isClientRequestType } from './requests.js'
import { KeySessions } from './key-sessions.js'
import { TenantRequestRates, type RequestRate } from './request-rates.js'
import { createRefusalLog, type RefusalLog } from './request-outcomes.js'
import { createSession } from './session.js'
import type { SnapshotIndexMessage } from './snapshot-index.js'
import type { CreationSeries } from './creation-series.js'
import { createPageRoutes } from '../../web/page-routes.js'
import type { AuditSink } from '../audit/index.js'
import { createLogWindows, type Logger, type LogWindows } from '../../log/index.js'
import type { ControlMetrics } from '../metrics/index.js'
import { createWebRoutes } from '../../web/index.js'
import { controlPlaneReadiness } from './readiness.js'

export interface GatewayOptions {
  port: number
  host?: string
  iam: () => Ref<IamMessage>
  shards: () => Ref<ShardMessage>[]
  directory: () => Ref<DirectoryMessage>
  registry: () => Ref<RegistryMessage>
  images: () => Ref<ImageIndexMessage>
  trajectories: () => Ref<TrajectoriesMessage>
  snapshots: () => Ref<SnapshotIndexMessage>
  /** The blob store's root: served on the same port over HTTP (reads: Range, join token; uploads: an API key). */
  blobRoot?: string
  /** Bounds of layer uploads (UploadDefaults unless given). */
  upload?: Partial<UploadTunables>
  /** Serve TLS (`wss://`, `https://`) on the port with this certificate and key; plain without. */
  tls?: TlsServerConfig
  /** Link tunables (heartbeats, frame limits), mostly for tests. */
  link?: LinkOptionsInput
  /** The control plane's recent creations: sessions count theirs in it, the page reads it. */
  creations?: CreationSeries
  /** Told the URL once listening. */
  onListening?: (url: string, port: number) => void
  /** Told why listening failed (a busy port: EADDRINUSE, with its address and port), before the actor fails with it. */
  onListenError?: (err: Error) => void
  /** The audit log every session writes to. */
  audit?: AuditSink
  /** Where sessions log refused requests (none: silent). */
  log?: Logger
  /** Served at /metrics (and counted into by sessions); without it /metrics answers 404. */
  metrics?: ControlMetrics
  /** Set: /metrics wants `Authorization: Bearer <token>`. */
  metricsToken?: string
  /** Sessions one key may hold open at once (`KeySessionDefaults.maxPerKey`). */
  maxSessionsPerKey?: number
}

type Peer = { kind: 'user', principal: Principal } | { kind: 'node' }

export const GatewayDefaults = {
  /** Refused sockets: the first of a flood is logged, then one line with the count this often while it lasts. */
  refusedLogEveryMs: 60_000,
  /** The longest a link past its tenant's request rate is not read, whatever the wait for a token. */
  maxReadHoldMs: 1000
}

export type GatewayMessage = { type: 'url' } | { type: 'links' } | { type: 'tls', tls: TlsServerConfig }
  /** Keys revoked: their sessions are closed (WARREN_ERR_UNAUTHENTICATED, reason `revoked`). */
  | { type: 'end-keys', keyIds: string[] }
  /** A tenant's quotas changed: its request rate applies from now. */
  | { type: 'request-rate', tenant: string, rate: RequestRate }

/** The address the SDK sends its requests to, and where session notices go on the SDK side. */
export const SESSION_ADDRESS = 'session'
export const CLIENT_ADDRESS = 'client'

export class Gateway extends Actor<GatewayMessage> {
  private server: LinkServer | undefined
  /** Refused sockets, logged a window at a time (src/log/log-window.ts). */
  private refusals: LogWindows<'address' | 'total', string> | undefined
  private http: Server | undefined
  private blobs: BlobRoutes | undefined
  private readonly nodeLinks = new Map<string, Link>()
  private unroute: (() => void) | undefined
  /** User links by key, so a revoked or expired key's sessions end at once. */
  private readonly keys: KeySessions
  /** Every request of a tenant's sessions takes from its rate first. */
  private readonly rates = new TenantRequestRates()
  /** Requests refused past a tenant's rate: the first of a flood logged, then one line a window, by tenant. */
  private rateRefusals: LogWindows<string, { tenant: string, keyId: string, limit: unknown }> | undefined
  /** Every session's refused requests, a line for the first of each kind and one a window for the rest. */
  private refusalLog: RefusalLog | undefined

  constructor (private readonly o: GatewayOptions) {
    super()
    this.keys = new KeySessions(o.maxSessionsPerKey !== undefined ? { maxPerKey: o.maxSessionsPerKey } : {})
  }

  async preStart (): Promise<void> {
    const system = this.ctx.system
    this.unroute = routeRemote(system, (name) => this.nodeLinks.get(name))
    // One port: WebSocket upgrades are links, plain HTTP is the blob store (nodes read layers, builds push them).
    const blobs = createBlobRoutes({
      iam: this.o.iam, images: this.o.images, rates: this.rates, refusals: () => this.refusalLog,
      ...(this.o.blobRoot !== undefined ? { blobRoot: this.o.blobRoot } : {}),
      ...(this.o.upload !== undefined ? { upload: this.o.upload } : {})
    })
    this.blobs = blobs
    // Health, readiness and metrics first (no key); every other path is the blob store's.
    const web = createWebRoutes({
      readiness: () => controlPlaneReadiness(this.o.shards, this.o.registry),
      ...(this.o.metrics !== undefined ? { metrics: { metrics: this.o.metrics, ...(this.o.metricsToken !== undefined ? { token: this.o.metricsToken } : {}) } } : {})
    })
    const page = createPageRoutes()
    // With a certificate the whole port is TLS: links, blob reads and uploads alike.
    this.http = createPortServer(this.o.tls, (req, res) => { if (!web.handle(req, res) && !page.handle(req, res)) blobs.handle(req, res) })
    this.server = createLinkServer({
      ...(this.o.link ?? {}),
      server: this.http,
      authenticate: (token) => this.authenticate(token),
      handler: (link) => (link.principal as Peer).kind === 'node' ? this.nodeHandler(link) : this.userHandler(link)
    })
    // A crowd of sockets is a line at its start and one a minute while it lasts, every socket counted.
    const boundOf = (why: 'address' | 'total'): string => why === 'address' ? 'maxSocketsPerAddress' : 'maxSockets'
    this.refusals = createLogWindows<'address' | 'total', string>(GatewayDefaults.refusedLogEveryMs, {
      first: (why, address) => this.o.log?.warn({ code: ErrorCodes.OVERLOADED, address, bound: boundOf(why), refused: 1 }, 'sockets refused: too many open'),
      summary: (why, refused, addresses) => this.o.log?.warn({ code: ErrorCodes.OVERLOADED, addresses, bound: boundOf(why), refused, windowMs: GatewayDefaults.refusedLogEveryMs }, 'sockets refused: too many open')
    })
    this.server.on('socketRefused', (address, why) => this.refusals?.note(why, address, address))
    if (this.o.log !== undefined) this.refusalLog = createRefusalLog(this.o.log)
    this.rateRefusals = createLogWindows<string, { tenant: string, keyId: string, limit: unknown }>(GatewayDefaults.refusedLogEveryMs, {
      first: (_tenant, e) => this.o.log?.warn({ code: ErrorCodes.QUOTA, quota: 'requests', ...e, refused: 1 }, 'requests refused: past the tenant\'s request rate'),
      summary: (tenant, refused, keyIds) => this.o.log?.warn({ code: ErrorCodes.QUOTA, quota: 'requests', tenant, keyIds, refused, windowMs: GatewayDefaults.refusedLogEveryMs }, 'requests refused: past the tenant\'s request rate')
    })
    await new Promise<void>((resolve, reject) => {
      this.http!.once('error', (err) => { this.o.onListenError?.(err); reject(err) })
      this.http!.listen(this.o.port, this.o.host, () => { this.http!.off('error', reject); resolve() })
    })
    const port = (this.http.address() as AddressInfo).port
    this.o.onListening?.(this.url()!, port)
  }

  /** `ws://host:port`, or `wss://` when the port serves TLS. */
  private url (): string | undefined {
    if (this.http === undefined) return undefined
    return `${this.o.tls !== undefined ? 'wss' : 'ws'}://${this.o.host ?? '127.0.0.1'}:${(this.http.address() as AddressInfo).port}`
  }

  receive (m: GatewayMessage): unknown {
    switch (m.type) {
      case 'url': return this.url()
      case 'links': return { nodes: [...this.nodeLinks.keys()], total: this.server?.links.size ?? 0 }
      case 'end-keys': this.keys.endKeys(m.keyIds); return undefined
      case 'request-rate': this.rates.set(m.tenant, m.rate); return undefined
      case 'tls':
        // New connections get the new certificate; open ones keep the one they negotiated.
        if (this.http === undefined || !servesTls(this.http)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'this control plane does not serve TLS: start it with --tls-cert and --tls-key', { field: 'tls' })
        ;(this.http as unknown as { setSecureContext: (o: TlsServerConfig) => void }).setSecureContext({ cert: m.tls.cert, key: m.tls.key })
        return true
    }
  }

  private async authenticate (token: string): Promise<Peer | null> {
    if (token.startsWith('wrnj_')) {
      if (await this.o.iam().ask<boolean>({ type: 'check-join', token })) return { kind: 'node' }
      this.o.log?.warn({ code: ErrorCodes.UNAUTHENTICATED }, 'node join refused: not the join token')
      return null
    }
    const principal = await this.o.iam().ask<Principal | null>({ type: 'authenticate', token })
    if (principal === null) {
      // The key's id when the token has a key's shape (a revoked or mistyped key); never the token.
      const keyId = keyIdOf(token)
      this.o.log?.info({ code: ErrorCodes.UNAUTHENTICATED, ...(keyId !== undefined ? { keyId } : {}) }, 'authentication refused')
      return null
    }
    // The tenant's first session reads its request rate; later changes are told (`request-rate`).
    await this.rates.learn(principal.tenant, async () => await this.o.iam().ask<RequestRate>({ type: 'get-quotas', tenant: principal.tenant }))
    return { kind: 'user', principal }
  }

  private userHandler (link: Link): LinkHandler {
    const principal = (link.principal as Extract<Peer, { kind: 'user' }>).principal
    const run = this.keys.track(link, principal)
    if (typeof run !== 'function') {
      // Over the key's session bound: the link is closing with the refusal; no session is made.
      this.o.log?.warn({ code: run.code, tenant: principal.tenant, keyId: principal.keyId }, 'session refused: the key holds the most sessions a key may')
      return { request: () => { throw run }, tell: () => {} }
    }
    const session = this.ctx.spawn(createSession({
      principal,
      iam: this.o.iam,
      shards: this.o.shards,
      directory: this.o.directory,
      registry: this.o.registry,
      images: this.o.images,
      trajectories: this.o.trajectories,
      snapshots: this.o.snapshots,
      ...(this.o.creations !== undefined ? { creations: this.o.creations } : {}),
      ...(this.o.audit !== undefined ? { audit: this.o.audit } : {}),
      ...(this.o.log !== undefined ? { log: this.o.log } : {}),
      ...(this.refusalLog !== undefined ? { refusals: this.refusalLog } : {}),
      ...(this.o.metrics !== undefined ? { metrics: this.o.metrics } : {}),
      notify: (notice) => { if (link.state !== 'closed') { try { link.tell(CLIENT_ADDRESS, notice) } catch { /* bounded buffer full: notices are best effort */ } } }
    }), { mailbox: { capacity: 10_000 } })
    link.on('close', () => { void this.ctx.system.stop(session) })
    // Throws the refusal of a message past the tenant's rate, and stops reading the link until
    // a token is there again: what the client sends meanwhile waits in its own socket, so a
    // flood past the rate costs the other tenants nothing.
    // A client that goes on sending while refused (it does not wait retryAfterMs) is held twice
    // as long each time, up to maxReadHoldMs; a request let through starts it over.
    let holdMs = 0
    const takeRate = (body: unknown): void => {
      const refusal = this.rates.admit(principal)
      if (refusal === undefined) { holdMs = 0; return }
      this.rateRefusals?.note(principal.tenant, { tenant: principal.tenant, keyId: principal.keyId, limit: refusal.details?.limit }, principal.keyId)
      this.o.metrics?.refusedRequest(requestType(body), refusal.code)
      holdMs = Math.min(GatewayDefaults.maxReadHoldMs, Math.max(Number(refusal.details?.retryAfterMs ?? 0), 2 * holdMs))
      link.holdReading(holdMs, refusal)
      throw refusal
    }
    return {
      // What the client sent goes to its session as it came: the session checks it.
      request: (_to, body, _from, _link, timeoutMs) => {
        takeRate(body)
        return run(() => session.ask({ type: 'client', body, answer: true }, { timeoutMs: timeoutMs ?? 120_000 }))
          .catch((err: unknown) => { throw toPublicError(err) })
      },
      tell: (_to, body) => {
        try { takeRate(body) } catch { return }
        session.tell({ type: 'client', body, answer: false })
      },
      // A client link carries no streams (output is read with `read` requests); an open still takes from the rate.
      stream: (reader) => {
        try { takeRate({ type: 'open' }) } catch (err) { reader.cancel(err); return }
        reader.cancel(createError(ErrorCodes.UNSUPPORTED, 'a client link carries no streams: read output with read requests (docs/protocol.md)'))
      }
    }
  }

  private nodeHandler (link: Link): LinkHandler {
    const system = this.ctx.system
    const trajectories = this.o.trajectories().address
    const allowed = new Set([this.o.registry().address, this.o.directory().address, trajectories])
    const exposed = exposeSystem(system, { allow: (address) => allowed.has(address) })
    return {
      ...exposed,
      request: (to, message, from, l, timeoutMs) => {
        // A node ships trajectory records; reading them back is for tenants' sessions only.
        if (to === trajectories && (message as { type?: unknown } | null)?.type !== 'append') {
          throw createError(ErrorCodes.FORBIDDEN, 'a node may only append to the trajectory store')
        }
        const m = message as RegistryMessage
        if (m !== null && typeof m === 'object' && m.type === 'join') {
          if (typeof m.nodeId !== 'string' || !/^[a-zA-Z0-9_.-]{1,64}$/.test(m.nodeId) || m.nodeId === system.name) {
            throw createError(ErrorCodes.INVALID_ARGUMENT, 'nodeId must be 1-64 of [a-zA-Z0-9_.-]')
          }
          // The newest link of a node wins: a restarted agent replaces its dead predecessor.
          this.nodeLinks.set(m.nodeId, l)
          l.once('close', () => { if (this.nodeLinks.get(m.nodeId) === l) this.nodeLinks.delete(m.nodeId) })
        }
        // A heartbeat speaks for the node its link joined as: another node's liveness and figures
        // are not its to give. An honest node whose link has not joined (yet) is told to join.
        if (m !== null && typeof m === 'object' && m.type === 'heartbeat' && this.nodeLinks.get(m.nodeId) !== l) return { rejoin: true }
        return exposed.request!(to, message, from, l, timeoutMs)
      }
    }
  }

  async postStop (): Promise<void> {
    this.unroute?.()
    this.blobs?.close()
    this.refusals?.close()
    this.rateRefusals?.close()
    this.refusalLog?.close()
    await this.server?.close()
    this.http?.closeAllConnections()
    await new Promise<void>((resolve) => { if (this.http?.listening === true) this.http.close(() => resolve()); else resolve() })
  }
}

/** A request's type for a metric label: a known-looking string, else `unknown` (the label set stays small). */
function requestType (body: unknown): string | undefined {
  const t = (body as { type?: unknown } | null)?.type
  return typeof t === 'string' && isClientRequestType(t) ? t : undefined
}

export function createGateway (options: GatewayOptions): () => Gateway {
  return () => new Gateway(options)
}
