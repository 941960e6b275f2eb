/**
 * The control plane's supervision tree (docs/design.md, "Supervision"):
 *
 *   root (one_for_one)
 *   ├── iam
 *   ├── registry
 *   ├── placement (one_for_one) ── shard-0 … shard-k
 *   ├── directory
 *   ├── images, snapshots (the image names; snapshots and their garbage collector)
 *   ├── trajectories (the trajectory store: nodes ship to it, sessions read it)
 *   └── gateway ── session per connection (temporary)
 *
 * Siblings find each other by name (`cp/iam`, …), looked up on every use, so a restarted
 * actor is found again without anyone holding a stale Ref.
 */
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { ActorSystem, type Ref } from '../../actors/index.js'
import { createSupervisor, type ChildSpec } from '../../supervisors/index.js'
import { resolveLinkOptions, type LinkOptionsInput, type TlsServerConfig } from '../../transport/index.js'
import { createIam, IamStore, type AdminKey, type EnsureOptions, type IamMessage, type Scope } from '../iam/index.js'
import { createPlacementShard, type ShardMessage } from '../placement/index.js'
import { createDirectory, type DirectoryMessage } from './directory.js'
import { LayerKinds, NameIndex } from '../../images/index.js'
import type { UploadTunables } from '../../images/upload/index.js'
import { openState } from '../../state/index.js'
import { createGateway, type GatewayMessage } from './gateway.js'
import { createImageIndex, type ImageIndexMessage } from './image-index.js'
import { createRegistry, createShardRecovery, type RegistryMessage } from './registry.js'
import { createTrajectories, TrajectoryStore, type TrajectoriesMessage } from '../trajectory/index.js'
import { createSnapshotIndex, type SnapshotIndexMessage, type SnapshotTunables } from './snapshot-index.js'
import { SnapshotStore } from './snapshot-store.js'
import { HibernatedStore } from './hibernated-store.js'
import { CreationSeries } from './creation-series.js'
import { AuditLog, type AuditTunables } from '../audit/index.js'
import { defaultLogger, watchSystem, type Logger } from '../../log/index.js'
import { createControlMetrics } from '../metrics/index.js'

/** The control plane's actor system name: nodes address `cp/registry` and `cp/directory`. */
export const CONTROL_PLANE = 'cp'

export const ControlPlaneDefaults = {
  port: 7100,
  host: '127.0.0.1',
  shards: 4,
  /** The most placement shards a control plane may be started with (`warren up --shards`). */
  maxShards: 64,
  heartbeatTimeoutMs: 3000
}

export interface ControlPlaneOptions {
  /** 0 picks a free port. */
  port?: number
  host?: string
  /** Where the durable state (src/state) and the blobs live; undefined keeps the state in memory. */
  dataDir?: string
  shards?: number
  heartbeatTimeoutMs?: number
  link?: LinkOptionsInput
  /** Sessions one key may hold open at once (`KeySessionDefaults.maxPerKey`). */
  maxSessionsPerKey?: number
  /** Bounds of layer uploads to the blob store (largest layer, uploads per tenant…; UploadDefaults). */
  upload?: Partial<UploadTunables>
  /** How long trajectories are kept after their sandbox ended (`TrajectoryDefaults.retentionMs`, 7 days). */
  trajectoryRetentionMs?: number
  /** Snapshot bounds (SnapshotDefaults): diffs before a flatten, snapshots per tenant, the collector's period. */
  snapshots?: Partial<SnapshotTunables>
  /** Where the control plane logs (default: silent unless WARREN_LOG_LEVEL names a level). */
  logger?: Logger
  /** Bounds of the audit log (AuditDefaults): file size before rotation, files kept, the write queue. */
  audit?: Partial<AuditTunables>
  /** Set: /metrics wants `Authorization: Bearer <token>` (`warren up --metrics-token`); unset, it is open like /healthz. */
  metricsToken?: string
  /**
   * The node join token to use instead of a fresh one (a deployment keeps it in a secret, so
   * nodes started from the same secret join across restarts): `wrnj_` and at least 32 more of [A-Za-z0-9_-].
   */
  joinToken?: string
  /** Serve `wss://` and `https://` on the one port with this certificate and key (PEM; `loadServerTls` reads them). */
  tls?: TlsServerConfig
}

export interface ControlPlane {
  readonly system: ActorSystem
  /** `ws://host:port` of the gateway (`wss://` with `tls`). */
  readonly url: string
  /** The node join token (a fresh one each start, unless `joinToken` was given). */
  readonly joinToken: string
  /** Issues an API key for a tenant (`expiresInMs`: its life from now; absent: no expiry). */
  createToken (tenant: string, scopes: Scope[], opts?: { expiresInMs?: number }): Promise<string>
  /**
   * The cluster's admin key (src/cluster/iam/admin-key.ts): kept when `candidate` (the config
   * file's token) is it or this process knows it, made when there is none (handed to `persist`
   * first), made anew with `rotate` (the old one revoked, its sessions closed); `how: 'lost'`
   * (no token) when its secret is not known here.
   */
  adminKey (opts?: EnsureOptions): Promise<AdminKey>
  /**
   * Serves a new certificate and key (`loadServerTls` reads and checks them) to new connections;
   * open ones keep theirs. A restarted gateway serves the newest.
   * @throws WARREN_ERR_INVALID_ARGUMENT when the control plane was started without TLS
   */
  reloadTls (tls: TlsServerConfig): Promise<void>
  /** Stops everything, newest first. */
  close (): Promise<void>
}

export async function startControlPlane (options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  if (options.joinToken !== undefined && !/^wrnj_[A-Za-z0-9_-]{32,}$/.test(options.joinToken)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, 'the join token must be wrnj_ followed by at least 32 of [A-Za-z0-9_-] (openssl rand -hex 32 makes the rest)', { field: 'joinToken' })
  }
  // Checked before any actor starts: a gateway failing on them would say only that it stopped.
  if (options.link !== undefined) resolveLinkOptions(options.link)
  const o = { ...ControlPlaneDefaults, ...options }
  const system = new ActorSystem({ name: CONTROL_PLANE })
  const log = options.logger ?? defaultLogger()
  // What the import of an earlier version's files could not take is the operator's to read.
  const state = openState(options.dataDir, (message) => log.warn({ part: 'state' }, message))
  const store = new IamStore(state.db)
  const names = new NameIndex(state.db)
  const kinds = new LayerKinds(state.db)
  const snapshotStore = new SnapshotStore(state.db)
  const hibernated = new HibernatedStore(state.db)
  const blobRoot = options.dataDir === undefined ? undefined : join(options.dataDir, 'blobs')
  // Steps arrive by the thousand a second: their commits wait for no fsync (they survive a crash of this process).
  const trajectoryStore = new TrajectoryStore(state.bulk)
  try {
    // The JSON files of earlier versions, imported once.
    state.importLegacy('iam.json', (data, warn) => store.importLegacy(data, warn))
    state.importLegacy('images.json', (data, warn) => names.importLegacy(data, warn))
  } catch (err) {
    state.close()
    throw err
  }
  const joinToken = store.rotateJoinToken(options.joinToken)
  // Outlives a restart of the gateway (the page's charts keep their minutes): one per control plane.
  const creations = new CreationSeries()
  let listenError: Error | undefined
  // Failures, restarts and dead letters of the control plane's actors, each logged once with its cause.
  // A gateway that cannot listen is the caller's error (a busy port, named), not a log line as well.
  const watch = watchSystem(system, log, undefined, (address) => listenError !== undefined && address === `${CONTROL_PLANE}/gateway`)
  const audit = new AuditLog({ ...(options.dataDir !== undefined ? { dir: options.dataDir } : {}), log, ...(options.audit !== undefined ? { tunables: options.audit } : {}) })
  // Changed in place by reloadTls, so a gateway the supervisor restarts serves the newest certificate.
  const tlsNow: TlsServerConfig | undefined = options.tls !== undefined ? { ...options.tls } : undefined

  const ref = <M>(name: string) => (): Ref<M> => {
    const r = system.lookup<M>(`${CONTROL_PLANE}/${name}`)
    if (r === undefined) throw new Error(`${name} is not running`)
    return r
  }
  const iam = ref<IamMessage>('iam')
  const registry = ref<RegistryMessage>('registry')
  const directory = ref<DirectoryMessage>('directory')
  const images = ref<ImageIndexMessage>('images')
  const trajectories = ref<TrajectoriesMessage>('trajectories')
  const snapshots = ref<SnapshotIndexMessage>('snapshots')
  const shardRefs = Array.from({ length: o.shards }, (_, i) => ref<ShardMessage>(`shard-${i}`))
  const shards = (): Ref<ShardMessage>[] => shardRefs.map((get) => get())

  // Counted into by sessions and supervisors, read by /metrics.
  const metrics = await createControlMetrics({
    system, shards: o.shards,
    ask: async (name, message) => await ref<unknown>(name)().ask(message, { timeoutMs: 2000 })
  })
  let url = ''
  const big = { mailbox: { capacity: 100_000 } }
  const children: ChildSpec[] = [
    {
      id: 'iam',
      start: createIam(store, {
        // A revoked key's sessions end at once; the gateway holds them.
        keysEnded: (keyIds) => system.lookup<GatewayMessage>(`${CONTROL_PLANE}/gateway`)?.tell({ type: 'end-keys', keyIds }),
        quotasChanged: (tenant, quotas) => system.lookup<GatewayMessage>(`${CONTROL_PLANE}/gateway`)?.tell({ type: 'request-rate', tenant, rate: quotas })
      }),
      spawn: { name: 'iam', ...big }
    },
    { id: 'registry', start: createRegistry({ shards, directory, heartbeatTimeoutMs: o.heartbeatTimeoutMs, log }), spawn: { name: 'registry', ...big } },
    {
      id: 'placement',
      shutdown: 'infinity',
      start: createSupervisor({
        children: Array.from({ length: o.shards }, (_, i): ChildSpec => ({
          id: `shard-${i}`, start: createPlacementShard({ peers: shards, recover: createShardRecovery(i, registry, directory) }), spawn: { name: `shard-${i}`, ...big }
        }))
      }),
      spawn: { name: 'placement' }
    },
    { id: 'directory', start: createDirectory({ shards, iam, hibernated }), spawn: { name: 'directory', ...big } },
    { id: 'images', start: createImageIndex(names, kinds, blobRoot), spawn: { name: 'images', ...big } },
    {
      id: 'snapshots',
      start: createSnapshotIndex({ store: snapshotStore, kinds, directory, ...(blobRoot !== undefined ? { blobRoot } : {}), ...(options.snapshots !== undefined ? { tunables: options.snapshots } : {}) }),
      spawn: { name: 'snapshots', ...big }
    },
    {
      id: 'trajectories',
      start: createTrajectories({
        store: trajectoryStore,
        quotaOf: (tenant) => store.quotasFor(tenant).trajectoryBytes,
        log,
        ...(options.dataDir !== undefined ? { blobRoot: join(options.dataDir, 'blobs') } : {}),
        ...(options.trajectoryRetentionMs !== undefined ? { retentionMs: options.trajectoryRetentionMs } : {})
      }),
      spawn: { name: 'trajectories', ...big }
    },
    {
      id: 'gateway',
      shutdown: 'infinity',
      start: createGateway({
        port: o.port, host: o.host, iam, shards, directory, registry, images, snapshots, trajectories, creations, audit, log,
        metrics, ...(options.metricsToken !== undefined ? { metricsToken: options.metricsToken } : {}),
        ...(blobRoot !== undefined ? { blobRoot } : {}),
        ...(options.link !== undefined ? { link: options.link } : {}),
        ...(options.maxSessionsPerKey !== undefined ? { maxSessionsPerKey: options.maxSessionsPerKey } : {}),
        ...(options.upload !== undefined ? { upload: options.upload } : {}),
        ...(tlsNow !== undefined ? { tls: tlsNow } : {}),
        onListening: (u) => { url = u },
        onListenError: (err) => { listenError ??= err }
      }),
      spawn: { name: 'gateway' }
    }
  ]
  const root = system.spawn(createSupervisor({ strategy: 'one_for_one', intensity: { maxRestarts: 5, periodMs: 10_000 }, children }), { name: 'root' })
  // The gateway's preStart listens; its first answered message means it is up (or it failed).
  // A failed listen reaches the ask as the gateway's stop; the caller is told the listen's own
  // error instead (a busy port names its address and port).
  await ref<{ type: 'url' }>('gateway')().ask({ type: 'url' }, { timeoutMs: 10_000 }).catch(async (err: unknown) => {
    if (listenError === undefined) throw err
    await system.stop(root, 15_000).catch(() => {})
    await system.shutdown(1000)
    watch.close()
    await audit.close()
    metrics.close()
    state.close()
    throw listenError
  })
  if (url === '') throw new Error('the gateway did not start')

  return {
    system,
    get url () { return url },
    joinToken,
    createToken: (tenant, scopes, opts = {}) => iam().ask<string>({ type: 'create-key', tenant, scopes, ...(opts.expiresInMs !== undefined ? { expiresInMs: opts.expiresInMs } : {}) }),
    adminKey: (opts = {}) => iam().ask<AdminKey>({ ...opts, type: 'admin-key' }),
    async reloadTls (tls) {
      if (tlsNow === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'this control plane does not serve TLS: start it with --tls-cert and --tls-key', { field: 'tls' })
      await ref<GatewayMessage>('gateway')().ask({ type: 'tls', tls }, { timeoutMs: 10_000 })
      Object.assign(tlsNow, { cert: tls.cert, key: tls.key })
    },
    async close () {
      await system.stop(root, 15_000)
      await system.shutdown(1000)
      watch.close()
      await audit.close()
      metrics.close()
      state.close()
    }
  }
}
