/**
 * A node: the agent on one machine (docs/design.md, "Supervision"):
 *
 *   node root (one_for_one)
 *   ├── agent ── sandboxes (dynamic, temporary children) ── sandbox per id
 *   └── control (link to the control plane; restarted with backoff when it closes)
 *
 * Backends are resources of the node process, made before the tree and closed after it.
 */
import { existsSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { ActorSystem, type Ref } from '../../actors/index.js'
import { ContainerBackendDefaults, ContainerDefaults, createCgroupProvider, createContainerBackend, type CgroupProvider, type ContainerBackend, type EgressProxyOptions } from '../../backends/container/index.js'
import { createFunctionBackend } from '../../backends/function/index.js'
import { createMicrovmBackend, MicrovmDefaults, microvmUnavailable, type MicrovmBackend } from '../../backends/microvm/index.js'
import type { Backend, BackendKind } from '../../backends/types.js'
import { shareLayerService, startLayerService, type LayerService } from '../../images/index.js'
import type { CacheMetrics } from '../../images/blob/index.js'
import { createSupervisor } from '../../supervisors/index.js'
import type { LinkOptionsInput } from '../../transport/index.js'
import type { NodeCapacity } from '../placement/index.js'
import { createControlLink, type ControlLinkMessage } from './control-link.js'
import { createBlobPusher } from './blob-push.js'
import { createNodeAgent, type NodeAgentOptions } from './node-agent.js'
import { NodeTrajectories, type ShipAck, type TrajectoryLimits } from '../trajectory/index.js'
import { NodeMeter } from '../metrics/index.js'
import type { NodeMessage } from './node-agent.js'
import { cpus, totalmem } from 'node:os'
import { defaultLogger, errorField, watchSystem, type Logger } from '../../log/index.js'

export interface NodeOptions {
  /** Control plane URL (`ws://…`, or `wss://…` when it serves TLS). */
  url: string
  joinToken: string
  /**
   * The control plane's CA (PEM) when its certificate is one the system does not trust: the
   * control link, layer fetches and blob pushes all verify against it (and the system's roots).
   */
  ca?: string
  /** Stable across restarts so a restarted agent rejoins as the same node. */
  nodeId?: string
  functionsDir?: string | null
  capacity?: Partial<NodeCapacity>
  heartbeatEveryMs?: number
  link?: LinkOptionsInput
  /** Where durable state lives (container journal, layers); without it the node offers functions only. */
  dataDir?: string
  /** Resource limits for container sandboxes (cgroups). */
  cgroups?: CgroupProvider
  /** Where container layers are cached (default: under dataDir); shared by nodes on one machine. */
  layersDir?: string
  /**
   * Load container layers on demand through FUSE, only the chunks read being fetched (default);
   * false pulls each layer whole before its first sandbox starts.
   */
  lazyLayers?: boolean
  /** Warm pool bounds for container sandboxes. */
  containerPool?: { min?: number, max?: number }
  /** Bounds of command output (the largest cap a command may ask for, what is held unread): `OutputDefaults`. */
  output?: NodeAgentOptions['output']
  /** Bounds of file transfers (the largest file a write makes or a read fetches): `FilesDefaults`. */
  files?: NodeAgentOptions['files']
  /** Egress (containers and VMs): the operator's pinned names (`{ 'mirror.internal': '10.0.0.5:3141' }`), and a resolver for tests. */
  egress?: EgressProxyOptions
  /** What sandboxes' trajectories keep (`TrajectoryDefaults`: the record budget, what goes inline). */
  trajectory?: Partial<TrajectoryLimits>
  /** MicroVMs: the operator's guest kernel (and its module tree) instead of Debian's. */
  microvm?: { kernel?: string, kernelModules?: string, pool?: { min?: number, max?: number }, templates?: boolean, guestDir?: string }
  /** Where the node logs (default: silent unless WARREN_LOG_LEVEL names a level); every line carries `node`. */
  logger?: Logger
}

/** Why this machine cannot run container sandboxes, or undefined when it can. */
export function containerUnavailable (): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root'
  if (!existsSync(ContainerDefaults.agentPath)) return `no agent at ${ContainerDefaults.agentPath} (run npm run setup)`
  if (!existsSync('/usr/bin/mkfs.erofs')) return 'mkfs.erofs is missing (Debian erofs-utils)'
  return undefined
}

export interface NodeProcess {
  readonly nodeId: string
  readonly system: ActorSystem
  /** Bytes fetched and served by the on-demand layer cache (undefined without lazy layers). */
  layerMetrics (): Promise<CacheMetrics | undefined>
  /** The layer server (undefined without lazy layers). */
  readonly layers: LayerService | undefined
  close (): Promise<void>
}

export function defaultNodeId (): string {
  return `node-${hostname().replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 40)}`
}

/** Starts a node and resolves once it has joined the control plane. */
export async function startNode (options: NodeOptions): Promise<NodeProcess> {
  const nodeId = options.nodeId ?? defaultNodeId()
  const system = new ActorSystem({ name: nodeId })
  const log = (options.logger ?? defaultLogger()).child({ node: nodeId })
  // Failures, restarts and dead letters of the node's actors (sandboxes among them), each logged once.
  const watch = watchSystem(system, log)
  const backends: Partial<Record<BackendKind, Backend>> = {
    function: createFunctionBackend({ functionsDir: options.functionsDir ?? null })
  }
  const container = containerUnavailable()
  // ws:// → http://, wss:// → https://: the blob store is the same port.
  const layerSource = { baseUrl: options.url.replace(/^ws/, 'http'), token: options.joinToken, ...(options.ca !== undefined ? { ca: options.ca } : {}) }
  let containerBackend: ContainerBackend | undefined
  let microvmBackend: MicrovmBackend | undefined
  const vmDataDir = options.dataDir !== undefined ? join(options.dataDir, 'microvm') : undefined
  const guestDir = vmDataDir !== undefined ? options.microvm?.guestDir ?? MicrovmDefaults.guestDir ?? join(vmDataDir, 'guest') : undefined
  const vmWhy = vmDataDir !== undefined ? microvmUnavailable(guestDir, options.microvm?.kernel) : 'no data directory'
  // Layers on demand are served by a process of the node's own that outlives the agent, so
  // sandboxes re-adopted after a crash of the agent keep reading their layers.
  const lazy = container === undefined && options.dataDir !== undefined && options.lazyLayers !== false
    ? await startLayerService({
      dir: join(options.dataDir, 'container', 'layer-server'),
      source: layerSource,
      cacheDir: join(options.dataDir, 'container', 'cache'),
      mountpoint: join('/run/warren/layers', nodeId),
      // The sandbox reading got EIO; the node says why, once per failure.
      onError: (message) => log.warn({ cause: message }, 'layer read failed'),
      // Its sandboxes on layers the dead server presented end, and their owners learn why.
      onRestart: () => { containerBackend?.layersLost(); microvmBackend?.layersLost() }
    }).catch((err: unknown) => {
      // No FUSE here (or it failed): the node still works, pulling layers whole.
      log.warn({ err: errorField(err) }, 'layers on demand unavailable, pulling them whole')
      return undefined
    })
    : undefined
  // Both backends stack the server's files: each reports its layers' users at adopt, the server hears the sum.
  const parties = [...(container === undefined && options.dataDir !== undefined ? ['container' as const] : []), ...(vmWhy === undefined ? ['microvm' as const] : [])]
  const lazyViews = lazy !== undefined ? shareLayerService(lazy, parties) : undefined
  if (container === undefined && options.dataDir !== undefined) {
    // Each node its own run directory: a node reclaims what it finds there that it did not journal.
    backends.container = containerBackend = createContainerBackend({ dataDir: join(options.dataDir, 'container'), layerSource, ...(lazyViews?.container !== undefined ? { lazy: lazyViews.container } : {}), runDir: join(ContainerDefaults.runDir, nodeId), ...(options.layersDir !== undefined ? { layersDir: options.layersDir } : {}), ...(options.containerPool !== undefined ? { pool: options.containerPool } : {}), ...(options.egress !== undefined ? { egress: options.egress } : {}), cgroups: options.cgroups ?? createCgroupProvider(`warren-${nodeId}`) })
  }
  if (vmDataDir !== undefined && vmWhy === undefined) {
    // The guest kernel is fetched and unpacked at the first microvm create (once per data dir).
    const progress = (line: string): void => { log.info({ backend: 'microvm' }, line) }
    backends.microvm = microvmBackend = createMicrovmBackend({
      dataDir: vmDataDir, ...(guestDir !== undefined ? { guestDir } : {}), layerSource, runDir: join(MicrovmDefaults.runDir, nodeId), cgroups: createCgroupProvider(`warren-${nodeId}-vm`),
      ...(lazyViews?.microvm !== undefined ? { lazy: lazyViews.microvm } : {}), ...(options.egress !== undefined ? { egress: options.egress } : {}), ...options.microvm, onProgress: progress
    })
  }
  const capacity: NodeCapacity = {
    cpus: cpus().length,
    memoryMiB: Math.floor(totalmem() / 1024 / 1024),
    // A container's writable layer is a tmpfs: it lives in the machine's memory, so no sandbox
    // here could ever be given a larger one.
    diskMiB: Math.floor(totalmem() / 1024 / 1024),
    cpuOvercommit: 64,
    memoryOvercommit: 16,
    // Ready sandboxes in the warm pools take room too: the cap leaves space for them.
    maxSandboxes: { function: 100_000, container: 3200 - (backends.container !== undefined ? options.containerPool?.max ?? ContainerBackendDefaults.poolMax : 0) },
    // A VM's guest RAM is taken for real: VMs are promised no more than the machine has, less a
    // tenth for the host and what the templates and shareable memory snapshots may hold.
    ...(microvmBackend !== undefined ? { maxMemoryMiB: { microvm: Math.max(0, Math.floor(totalmem() / 1024 / 1024 * 0.9) - 2 * MicrovmDefaults.templateMemoryMiB) } } : {}),
    backends: Object.keys(backends) as BackendKind[],
    ...(microvmBackend !== undefined ? { machines: [await microvmBackend.machine()] } : {}),
    ...options.capacity
  }
  const pushBlob = createBlobPusher(options.url, options.joinToken, undefined, options.ca)
  // The logs outlive the agent actor (a restarted one finds them) and go to the control plane over the control link.
  const trajectories = new NodeTrajectories({
    nodeId, pushBlob, log, ...(options.dataDir !== undefined ? { dir: join(options.dataDir, 'trajectories') } : {}),
    ...(options.trajectory !== undefined ? { limits: options.trajectory } : {}),
    send: async (batch) => {
      const link = control()
      if (link === undefined) throw new Error('no control link')
      return await link.ask<ShipAck>({ type: 'ship', batch }, { timeoutMs: 15_000 })
    }
  })
  // The node's own figures, which its heartbeats carry to the control plane's /metrics.
  const meter = new NodeMeter()
  meter.watch(system)
  const figures = async (): Promise<ReturnType<NodeMeter['figures']>> => {
    const agent = system.lookup<NodeMessage>(`${nodeId}/agent`)
    const counts = agent === undefined ? {} : await agent.ask<Partial<Record<string, number>>>({ type: 'counts' }, { timeoutMs: 2000 }).catch(() => ({}))
    return meter.figures(system, counts, await lazy?.metrics().catch(() => undefined))
  }
  let joined!: () => void
  let refused!: (err: Error) => void
  const joinedOnce = new Promise<void>((resolve, reject) => { joined = resolve; refused = reject })
  const root = system.spawn(createSupervisor({
    strategy: 'one_for_one',
    intensity: { maxRestarts: 10, periodMs: 10_000 },
    children: [
      {
        id: 'agent',
        start: createNodeAgent({
          nodeId, capacity, backends, report: (event) => control()?.tell({ type: 'event', event }),
          pushBlob, log,
          trajectories,
          meter,
          ...(options.output !== undefined ? { output: options.output } : {}),
          ...(options.files !== undefined ? { files: options.files } : {})
        }),
        spawn: { name: 'agent', mailbox: { capacity: 100_000 } },
        shutdown: 'infinity'
      },
      {
        id: 'control',
        start: createControlLink({
          url: options.url,
          joinToken: options.joinToken,
          ...(options.ca !== undefined ? { ca: options.ca } : {}),
          nodeId,
          capacity,
          registry: 'cp/registry',
          directory: 'cp/directory',
          trajectories: 'cp/trajectories',
          onSession: () => trajectories.linkUp(),
          onLinkDown: () => trajectories.linkDown(),
          figures,
          ...(options.heartbeatEveryMs !== undefined ? { heartbeatEveryMs: options.heartbeatEveryMs } : {}),
          ...(options.link !== undefined ? { link: options.link } : {}),
          onJoined: () => joined(),
          onRefused: (err) => refused(err)
        }),
        spawn: { name: 'control', mailbox: { capacity: 100_000 } },
        backoff: { minMs: 200, maxMs: 10_000, resetAfterMs: 30_000 }
      }
    ]
  }), { name: 'root' })
  function control (): Ref<ControlLinkMessage> | undefined {
    return system.lookup<ControlLinkMessage>(`${nodeId}/control`)
  }
  const close = async (): Promise<void> => {
    await system.stop(root, 15_000)
    await system.shutdown(1000)
    watch.close()
    trajectories.close()
    await Promise.all(Object.values(backends).map((b) => b.close().catch(() => {})))
    await lazy?.close().catch(() => {})
  }
  // A control plane this node can never reach (its certificate refused) ends the start with why.
  await joinedOnce.catch(async (err: unknown) => { await close(); throw err })
  log.info({ backends: Object.keys(backends), url: options.url, lazyLayers: lazy !== undefined }, 'node started and joined')
  return {
    nodeId,
    system,
    layerMetrics: async () => await lazy?.metrics(),
    layers: lazy,
    close
  }
}
