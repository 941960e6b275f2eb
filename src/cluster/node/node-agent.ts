/**
 * NodeAgent: the actor on each machine that turns "create these sandboxes" into sandbox actors,
 * children of a dynamic supervisor (temporary: a crashed sandbox is reclaimed, never revived).
 * It answers creates in batches, so 5,000 creations a second cost hundreds of messages, not
 * thousands.
 */
import { Actor, type Ref } from '../../actors/index.js'
import type { Backend, BackendKind } from '../../backends/types.js'
import { createError, ErrorCodes, fromWireError, isWarrenError, toWireError, type WarrenError, type WireError } from '../../errors.js'
import { createDynamicSupervisor, type DynamicSupervisorMessage } from '../../supervisors/index.js'
import type { NodeCapacity } from '../placement/index.js'
import { AheadBudget, FilesDefaults, OutputPool, Sandbox, type FilesLimits, type OutputLimits, type SandboxArgs, type SandboxEvent, type SandboxInfo, type SandboxMessage, type SandboxMeta } from '../sandbox/index.js'
import type { SandboxSpec } from '../spec.js'
import { NodeTrajectories } from '../trajectory/index.js'
import type { BlobPusher } from './blob-push.js'
import { errorField, silentLogger, type Logger } from '../../log/index.js'
import type { ExecMeter } from '../metrics/index.js'

/** One sandbox to create: the id and tenant come from the control plane. */
export interface CreateItem {
  id: string
  tenant: string
  spec: SandboxSpec
  /**
   * A sandbox made again under its id (resume of a hibernated one, restore): its trajectory
   * goes on from this seq, without a new header.
   */
  trajectory?: { nextSeq: number }
}

/** One answer per item, in order. */
/** `warm`: its backend handed out a sandbox made ahead (metrics label creations by it). */
export type CreateOutcome = { id: string, address: string, warm?: boolean } | { id: string, error: WireError }

export type NodeMessage =
  | { type: 'create', items: CreateItem[] }
  | { type: 'kill', id: string }
  | { type: 'list' }
  | { type: 'summaries' }
  | { type: 'capacity' }
  | { type: 'layers' }
  /** Live sandboxes by backend (the node's heartbeat figures). */
  | { type: 'counts' }

/** What the control plane needs to know of a live sandbox to rebuild its record (after a restart of either side). */
export interface SandboxSummary {
  id: string
  tenant: string
  address: string
  spec: SandboxSpec
  createdAt: number
  /** When it ends (`createdAt + spec.ttlMs` unless a setTtl moved it). */
  expiresAt?: number
  /** True while it is paused (frozen): its record stays paused, and its CPU free for others. */
  paused?: boolean
  /** Its pauses and resumes so far (`SandboxInfo.pauseSeq`). */
  pauseSeq?: number
}

export interface NodeAgentOptions {
  nodeId: string
  capacity: NodeCapacity
  backends: Partial<Record<BackendKind, Backend>>
  /** Where sandbox state changes go (the control link forwards them to the control plane). */
  report: (event: SandboxEvent) => void
  maxSandboxes?: number
  /** Bounds of command output on this node (`OutputDefaults`): the cap a command may ask for, what is buffered unread. */
  output?: Partial<OutputLimits>
  /** Bounds of file transfers on this node (`FilesDefaults`): the largest file, the chunk size. */
  files?: Partial<FilesLimits>
  /** Puts what sandboxes make (snapshot layers, trajectory records) into the control plane's blob store. */
  pushBlob?: BlobPusher
  /** The node's trajectory logs and their shipper (without it, logs kept in memory that go nowhere). */
  trajectories?: NodeTrajectories
  /** Where the agent logs its start, adoptions, reclaims and sandbox ends (none: silent). */
  log?: Logger
  /** The node's command counters, which its heartbeats carry (NodeMeter). */
  meter?: ExecMeter
}

export const NodeAgentDefaults = {
  /** How long a backend may take to make a sandbox (a cold layer fetch included). */
  startTimeoutMs: 60_000
}

/** Sandbox actors are named by id, so any process can address one as `${nodeId}/sb-${id}`. */
export function sandboxAddress (nodeId: string, sandboxId: string): string {
  return `${nodeId}/sb-${sandboxId}`
}

export class NodeAgent extends Actor<NodeMessage> {
  private sandboxes!: Ref<DynamicSupervisorMessage<SandboxArgs>>
  private readonly live = new Map<string, { ref: Ref<SandboxMessage>, tenant: string, spec: SandboxSpec, createdAt: number }>()
  /** Unread output of every sandbox here, bounded together. */
  private readonly output: OutputPool
  /** Upload chunks held ahead of gaps by every sandbox here, bounded together. */
  private readonly fileBudget: AheadBudget
  private readonly trajectories: NodeTrajectories
  private readonly log: Logger

  constructor (private readonly o: NodeAgentOptions) {
    super()
    this.log = o.log ?? silentLogger()
    this.output = new OutputPool(o.output)
    this.fileBudget = new AheadBudget(o.files?.nodeAheadBytes ?? FilesDefaults.nodeAheadBytes)
    this.trajectories = o.trajectories ?? new NodeTrajectories({ nodeId: o.nodeId })
  }

  async preStart (): Promise<void> {
    this.sandboxes = this.ctx.spawn(createDynamicSupervisor<SandboxArgs, SandboxMessage>({
      child: {
        start: (args) => new Sandbox(args),
        spawn: (args) => ({ name: `sb-${args.id}`, mailbox: { capacity: 1000 } }),
        restart: 'temporary',
        shutdown: 10_000
      },
      maxChildren: this.o.maxSandboxes ?? 100_000
    }), { name: 'sandboxes', mailbox: { capacity: 100_000 } })
    const { adopted, reclaimed } = await this.adoptSurvivors()
    // Logs a previous agent left whose sandboxes were not re-adopted: those sandboxes are gone.
    this.trajectories.endUnclaimed()
    this.log.info({ adopted, reclaimed, backends: Object.keys(this.o.backends) }, 'node agent started')
  }

  /** Sandboxes of durable backends that outlived the previous agent get their actors back. */
  private async adoptSurvivors (): Promise<{ adopted: number, reclaimed: number }> {
    let adopted = 0
    let reclaimed = 0
    for (const backend of Object.values(this.o.backends)) {
      if (backend?.adopt === undefined) continue
      for (const { handle, meta, paused, execs } of await backend.adopt()) {
        const m = meta as SandboxMeta
        try {
          await this.start({ id: m.id, tenant: m.tenant, spec: m.spec }, backend, { handle, createdAt: m.createdAt, ...(paused === true ? { paused } : {}), ...(execs !== undefined ? { execs } : {}) })
          adopted++
          this.log.info({ sandbox: m.id, tenant: m.tenant, backend: m.spec.backend, ...(paused === true ? { paused } : {}) }, 'sandbox adopted')
        } catch (err) {
          reclaimed++
          this.log.warn({ sandbox: m.id, tenant: m.tenant, backend: m.spec.backend, err: errorField(err) }, 'sandbox reclaimed: it could not be adopted')
          await backend.kill(handle).catch(() => {})
        }
      }
    }
    return { adopted, reclaimed }
  }

  receive (m: NodeMessage): unknown {
    switch (m.type) {
      case 'create': return this.ctx.answerLater(this.create(m.items))
      case 'kill': {
        const entry = this.live.get(m.id)
        if (entry === undefined) throw createError(ErrorCodes.NOT_FOUND, `no sandbox ${m.id} on ${this.o.nodeId}`)
        return this.ctx.answerLater(entry.ref.ask({ type: 'kill' }))
      }
      case 'list': return this.ctx.answerLater(Promise.all([...this.live.values()].map((e) => e.ref.ask<SandboxInfo>({ type: 'info' }).catch(() => undefined))))
      case 'summaries':
        // Each sandbox says when it ends now (a setTtl may have moved it); one that cannot say is summarised without.
        return this.ctx.answerLater(Promise.all([...this.live].map(async ([id, e]): Promise<SandboxSummary> => {
          const summary: SandboxSummary = { id, tenant: e.tenant, address: e.ref.address, spec: e.spec, createdAt: e.createdAt }
          const info = await e.ref.ask<SandboxInfo>({ type: 'info' }, { timeoutMs: 5000 }).catch(() => undefined)
          if (info === undefined) return summary
          return { ...summary, expiresAt: info.expiresAt, ...(info.state === 'paused' ? { paused: true } : {}), ...(info.pauseSeq !== undefined ? { pauseSeq: info.pauseSeq } : {}) }
        })))
      case 'capacity': return this.o.capacity
      case 'layers': return Object.values(this.o.backends).flatMap((b) => b?.cachedLayers?.() ?? [])
      case 'counts': {
        const out: Partial<Record<BackendKind, number>> = {}
        for (const e of this.live.values()) out[e.spec.backend] = (out[e.spec.backend] ?? 0) + 1
        return out
      }
    }
  }

  private async create (items: CreateItem[]): Promise<CreateOutcome[]> {
    return await Promise.all(items.map(async (item): Promise<CreateOutcome> => {
      try {
        const backend = this.o.backends[item.spec.backend]
        if (backend === undefined) throw createError(ErrorCodes.UNSUPPORTED, `node ${this.o.nodeId} has no ${item.spec.backend} backend`)
        const { address, warm } = await this.start(item, backend, undefined)
        return { id: item.id, address, ...(warm ? { warm } : {}) }
      } catch (err) {
        return { id: item.id, error: toWireError(err) }
      }
    }))
  }

  /**
   * A sandbox's end, once, with its reason: at debug when it ended as asked (killed, its TTL, idle,
   * the node shutting down), at warn when something went wrong (failed, oom, lost).
   */
  private logEnd (event: SandboxEvent, backend: string): void {
    const routine = event.reason === 'killed' || event.reason === 'ttl' || event.reason === 'idle' || event.reason === 'node-shutdown'
    this.log[routine ? 'debug' : 'warn']({
      sandbox: event.id, tenant: event.tenant, backend, state: event.state, reason: event.reason ?? event.state,
      ...(event.code !== undefined ? { code: event.code } : {}), ...(event.message !== undefined ? { cause: event.message } : {})
    }, 'sandbox ended')
  }

  /** Starts a sandbox actor and waits until its backend sandbox is ready; returns its address, and whether it came warm. */
  private async start (item: CreateItem, backend: Backend, adopted: SandboxArgs['adopted']): Promise<{ address: string, warm: boolean }> {
    const createdAt = adopted?.createdAt ?? Date.now()
    // Why it failed, if it does, as the sandbox reports it: its actor stops at once after, so
    // the `info` below is answered only by the kernel's "has stopped".
    let failure: SandboxEvent | undefined
    const trajectory = this.trajectories.open({
      sandboxId: item.id, tenant: item.tenant, spec: item.spec, createdAt, durable: backend.adopt !== undefined,
      // Adopted paused, its commands are known only once it is resumed.
      ...(adopted?.paused === true && backend.resumableExecs === true ? { resumable: 'unfinished' as const } : adopted?.execs !== undefined ? { resumable: adopted.execs.map((x) => x.tag) } : {}),
      ...(item.trajectory !== undefined ? { nextSeq: item.trajectory.nextSeq } : {})
    })
    const args: SandboxArgs = {
      id: item.id,
      tenant: item.tenant,
      spec: item.spec,
      backend,
      output: this.output,
      fileBudget: this.fileBudget,
      ...(this.o.files !== undefined ? { files: this.o.files } : {}),
      ...(this.o.pushBlob !== undefined ? { pushBlob: this.o.pushBlob } : {}),
      report: (event) => {
        if (event.state === 'failed') failure = event
        if (event.state === 'gone' || event.state === 'failed') {
          this.live.delete(event.id)
          this.logEnd(event, item.spec.backend)
        }
        this.o.report(event)
      },
      trajectory,
      ...(this.o.meter !== undefined ? { meter: this.o.meter } : {}),
      ...(adopted !== undefined ? { adopted } : {})
    }
    const ref = await this.sandboxes.ask<Ref<SandboxMessage>>({ type: 'start-child', args }).catch((err: unknown) => {
      void trajectory.close() // no actor to end it: it ends here
      throw err
    })
    this.live.set(item.id, { ref, tenant: item.tenant, spec: item.spec, createdAt })
    // `info` queues behind preStart: when it answers, the backend has made the sandbox.
    let info: SandboxInfo
    try {
      info = await ref.ask<SandboxInfo>({ type: 'info' }, { timeoutMs: NodeAgentDefaults.startTimeoutMs })
    } catch (err) {
      if (failure !== undefined) throw startFailure(item, failure)
      if (isWarrenError(err, ErrorCodes.ASK_TIMEOUT)) {
        ref.tell({ type: 'kill', reason: 'failed' })
        throw createError(ErrorCodes.TIMEOUT, `sandbox ${item.id} did not start within ${NodeAgentDefaults.startTimeoutMs} ms on node ${this.o.nodeId}`, { id: item.id })
      }
      throw err
    }
    // An adopted sandbox that was paused starts paused.
    if (info.state !== 'ready' && info.state !== 'paused') throw startFailure(item, failure ?? { id: item.id, tenant: item.tenant, state: info.state, ...(info.message !== undefined ? { message: info.message } : {}) })
    return { address: ref.address, warm: info.warm === true }
  }
}

/**
 * The error a create answers when the backend could not make the sandbox: the backend's own
 * cause (a layer that cannot be fetched or mounted, a resource it lacks), with its code when
 * that is a public one, so the trainer reads why and not that an actor stopped.
 */
function startFailure (item: CreateItem, event: SandboxEvent): WarrenError {
  const kernel = new Set<string>([ErrorCodes.ACTOR_STOPPED, ErrorCodes.ACTOR_FAILED, ErrorCodes.NO_SUCH_ACTOR, ErrorCodes.ASK_TIMEOUT, ErrorCodes.DUPLICATE_NAME, ErrorCodes.SUPERVISOR_INTENSITY])
  const code = event.code !== undefined && !kernel.has(event.code) ? fromWireError({ code: event.code, message: '' }).code : ErrorCodes.INTERNAL
  return createError(code, `sandbox ${item.id} could not start on the ${item.spec.backend} backend: ${withoutHostDirs(event.message ?? event.state)}`, {
    id: item.id, backend: item.spec.backend, ...(event.field !== undefined ? { field: event.field } : {})
  })
}

/**
 * A backend's message as a tenant may read it: the node's directories go, the file names
 * (a layer's digest) stay — where the node keeps things is not the tenant's to learn.
 */
export function withoutHostDirs (message: string): string {
  return message.replace(/(?<![\w.:/])\/(?:[^\s/:'"()]+\/)+(?=[^\s/:'"()]+)/g, '')
}

export function createNodeAgent (options: NodeAgentOptions): () => NodeAgent {
  return () => new NodeAgent(options)
}
