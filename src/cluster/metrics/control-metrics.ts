/**
 * The control plane's metrics: one prom-client Registry per control plane (so two in one test
 * process do not share counts), the counters its code moves where things happen (a sandbox
 * made, a create refused, a supervisor restart), and families read at scrape time from the
 * directory, the registry (with each live node's heartbeat figures) and the placement shards.
 * Names and labels: docs/operations.md.
 */
import type { Counter, Histogram, Registry } from 'prom-client'
import type { ActorSystem, SupervisorRestart } from '../../actors/index.js'
import { ErrorCodes } from '../../errors.js'
import { BACKEND_LABELS, DEAD_LETTER_REASONS, MetricsDefaults, NODE_ACTOR_KINDS } from './defaults.js'
import { BoundedLabel, registerFamily, registerHistogramFamily, type Sample } from './families.js'
import type { NodeFigures } from './node-figures.js'

/** What the registry answers to `{ type: 'figures' }`: its live nodes, with their last figures. */
export interface NodesFigures {
  nodes: Array<{ id: string, capacity: { cpus: number, memoryMiB: number, maxSandboxes: Partial<Record<string, number>>, backends: string[] }, figures?: NodeFigures }>
  lost: number
  /** Heartbeats whose figures were refused (malformed), since the registry started. */
  refused: number
}

/** Live and hibernated sandboxes by state, then backend (the directory's `state-counts`). */
export type StateCounts = Record<string, Record<string, number>>

export interface ControlMetricsSources {
  system: ActorSystem
  /** Asks an actor of the control plane by name (`directory`, `registry`, `shard-0`…); rejects when it is not running. */
  ask: <R>(actor: string, message: unknown) => Promise<R>
  shards: number
}

interface Scraped {
  nodes: NodesFigures
  usage: Record<string, { cpus: number, memoryMiB: number }>
  states: StateCounts
  waiting: Array<number | undefined>
}

const CODES = new Set<string>(Object.values(ErrorCodes))
const codeLabel = (code: unknown): string => typeof code === 'string' && CODES.has(code) ? code : 'other'
const backendLabel = (b: unknown): string => typeof b === 'string' && (BACKEND_LABELS as readonly string[]).includes(b) ? b : 'other'

type PromClient = typeof import('prom-client')

/**
 * The control plane's metrics, with prom-client loaded only now: every `warren` command imports
 * the cluster code, and only a control plane needs the library.
 */
export async function createControlMetrics (sources: ControlMetricsSources): Promise<ControlMetrics> {
  return new ControlMetrics(sources, await import('prom-client'))
}

export class ControlMetrics {
  readonly registry: Registry
  private readonly creations: Counter<'backend' | 'start'>
  private readonly createSeconds: Histogram<'backend' | 'start'>
  private readonly createFailures: Counter<'backend' | 'code'>
  private readonly refused: Counter<'request' | 'code'>
  private readonly restarts: Counter<'supervisor'>
  private readonly shardRestarts: Counter<'shard'>
  private readonly kinds = new BoundedLabel(MetricsDefaults.maxActorKinds)
  private scraped: Scraped = { nodes: { nodes: [], lost: 0, refused: 0 }, usage: {}, states: {}, waiting: [] }
  private readonly onRestart: (e: SupervisorRestart) => void

  constructor (private readonly o: ControlMetricsSources, prom: PromClient) {
    const { Counter, Histogram, Registry, collectDefaultMetrics } = prom
    this.registry = new Registry()
    const registers = [this.registry]
    this.creations = new Counter({ name: 'warren_sandbox_creations_total', help: 'Sandboxes made, by backend and whether a warm one was handed out.', labelNames: ['backend', 'start'], registers })
    this.createSeconds = new Histogram({ name: 'warren_sandbox_creation_seconds', help: 'Time from a create request (checked, admitted) to its sandbox ready, by backend and warm/cold start.', labelNames: ['backend', 'start'], buckets: MetricsDefaults.createBuckets, registers })
    this.createFailures = new Counter({ name: 'warren_sandbox_creation_failures_total', help: 'Sandboxes a create asked for and did not get (placement or node refused), by backend and error code.', labelNames: ['backend', 'code'], registers })
    this.refused = new Counter({ name: 'warren_requests_refused_total', help: 'Client requests answered with an error, by request type and error code.', labelNames: ['request', 'code'], registers })
    this.restarts = new Counter({ name: 'warren_supervisor_restarts_total', help: 'Children the control plane\'s supervisors restarted, by supervisor.', labelNames: ['supervisor'], registers })
    this.shardRestarts = new Counter({ name: 'warren_placement_shard_restarts_total', help: 'Restarts of placement shards, by shard.', labelNames: ['shard'], registers })
    collectDefaultMetrics({ register: this.registry })
    this.onRestart = (e) => this.restarted(e)
    o.system.on('supervisorRestart', this.onRestart)
    this.registerScraped()
  }

  /** A sandbox was made: `seconds` from its request, warm when a backend handed out a ready one. */
  created (backend: string, warm: boolean, seconds: number): void {
    const labels = { backend: backendLabel(backend), start: warm ? 'warm' : 'cold' }
    this.creations.inc(labels)
    this.createSeconds.observe(labels, seconds)
  }

  /** A sandbox a create asked for was not made. */
  createFailed (backend: string, code: unknown): void {
    this.createFailures.inc({ backend: backendLabel(backend), code: codeLabel(code) })
  }

  /** A client's request was answered with an error (`request` is its type when the session knows it). */
  refusedRequest (request: string | undefined, code: unknown): void {
    this.refused.inc({ request: request ?? 'unknown', code: codeLabel(code) })
  }

  private restarted (e: SupervisorRestart): void {
    const name = e.supervisor.slice(e.supervisor.indexOf('/') + 1)
    this.restarts.inc({ supervisor: this.kinds.of(name) })
    const shard = /^shard-(\d+)$/.exec(e.child)
    if (name === 'placement' && shard !== null && Number(shard[1]) < this.o.shards) this.shardRestarts.inc({ shard: shard[1]! })
  }

  /** Reads what the families print from the actors that know it; a part that does not answer prints nothing. */
  async refresh (): Promise<void> {
    const [nodes, states, waiting] = await Promise.all([
      this.o.ask<NodesFigures>('registry', { type: 'figures' }).catch(() => ({ nodes: [], lost: 0, refused: 0 })),
      this.o.ask<StateCounts>('directory', { type: 'state-counts' }).catch(() => ({})),
      Promise.all(Array.from({ length: this.o.shards }, async (_, i) => (await this.o.ask<{ waiting: number }>(`shard-${i}`, { type: 'stats' }).catch(() => undefined))?.waiting))
    ])
    const usage = await this.o.ask<Record<string, { cpus: number, memoryMiB: number }>>('directory', { type: 'usage', nodeIds: nodes.nodes.map((n) => n.id) }).catch(() => ({}))
    this.scraped = { nodes, usage, states, waiting }
  }

  /** The Prometheus text of everything, read afresh. */
  async text (): Promise<string> {
    await this.refresh()
    return await this.registry.metrics()
  }

  get contentType (): string { return this.registry.contentType }

  close (): void {
    this.o.system.off('supervisorRestart', this.onRestart)
  }

  private registerScraped (): void {
    const r = this.registry
    const system = this.o.system
    const s = (): Scraped => this.scraped
    registerFamily(r, 'warren_sandboxes', 'Sandboxes the directory holds, by state and backend (ended ones while they are remembered).', 'gauge',
      () => Object.entries(s().states).flatMap(([state, byBackend]) => Object.entries(byBackend).map(([backend, value]) => ({ labels: { state, backend: backendLabel(backend) }, value }))))
    registerFamily(r, 'warren_nodes', 'Nodes the registry knows, by state.', 'gauge',
      () => [{ labels: { state: 'alive' }, value: s().nodes.nodes.length }, { labels: { state: 'lost' }, value: s().nodes.lost }])
    registerFamily(r, 'warren_node_figures_refused_total', 'Heartbeats whose figures were malformed and not kept.', 'counter', () => [{ labels: {}, value: s().nodes.refused }])
    registerFamily(r, 'warren_placement_waiting', 'Placements waiting for capacity, by shard.', 'gauge',
      () => s().waiting.flatMap((w, i) => w === undefined ? [] : [{ labels: { shard: String(i) }, value: w }]))
    registerFamily(r, 'warren_dead_letters_total', 'Messages the control plane\'s actors could not take (mailbox overflow, stopped or missing actor), by reason.', 'counter',
      () => DEAD_LETTER_REASONS.map((reason) => ({ labels: { reason }, value: system.deadLetters[reason] })))
    const mailboxes = (pick: (d: { actors: number, queued: number, max: number }) => number) => (): Sample[] =>
      [...system.mailboxDepths((name) => this.kinds.of(name))].map(([kind, d]) => ({ labels: { kind }, value: pick(d) }))
    registerFamily(r, 'warren_actors', 'Live actors of the control plane, by kind.', 'gauge', mailboxes((d) => d.actors))
    registerFamily(r, 'warren_mailbox_depth', 'Messages queued in the control plane\'s mailboxes, summed by actor kind.', 'gauge', mailboxes((d) => d.queued))
    registerFamily(r, 'warren_mailbox_depth_max', 'The deepest mailbox of each actor kind of the control plane.', 'gauge', mailboxes((d) => d.max))
    this.registerNodes()
  }

  /** The `warren_node_*` families: capacity and use from the registry and directory, the rest from the nodes' heartbeats. */
  private registerNodes (): void {
    const r = this.registry
    const live = (): NodesFigures['nodes'] => this.scraped.nodes.nodes
    const per = (value: (n: NodesFigures['nodes'][number]) => number | undefined) => (): Sample[] =>
      live().flatMap((n) => { const v = value(n); return v === undefined ? [] : [{ labels: { node: n.id }, value: v }] })
    const fig = (value: (f: NodeFigures) => number) => per((n) => n.figures === undefined ? undefined : value(n.figures))
    const MiB = 1024 * 1024
    registerFamily(r, 'warren_node_capacity_cpus', 'CPUs a node offers (before overcommit).', 'gauge', per((n) => n.capacity.cpus))
    registerFamily(r, 'warren_node_capacity_memory_bytes', 'Memory a node offers (before overcommit).', 'gauge', per((n) => n.capacity.memoryMiB * MiB))
    registerFamily(r, 'warren_node_capacity_sandboxes', 'Most sandboxes a node runs at once, by backend.', 'gauge',
      () => live().flatMap((n) => n.capacity.backends.map((b) => ({ labels: { node: n.id, backend: backendLabel(b) }, value: n.capacity.maxSandboxes[b] ?? 0 }))))
    registerFamily(r, 'warren_node_allocated_cpus', 'CPUs promised to the live sandboxes on a node.', 'gauge', per((n) => this.scraped.usage[n.id]?.cpus))
    registerFamily(r, 'warren_node_allocated_memory_bytes', 'Memory promised to the live sandboxes on a node.', 'gauge', per((n) => { const u = this.scraped.usage[n.id]; return u === undefined ? undefined : u.memoryMiB * MiB }))
    registerFamily(r, 'warren_node_sandboxes', 'Sandboxes running on a node, by backend (as the node counts them).', 'gauge',
      () => live().flatMap((n) => n.figures === undefined ? [] : BACKEND_LABELS.map((b) => ({ labels: { node: n.id, backend: b }, value: n.figures!.sandboxes[b] }))))
    registerFamily(r, 'warren_node_execs_total', 'Commands started on a node.', 'counter', fig((f) => f.execs))
    registerHistogramFamily(r, 'warren_node_exec_duration_seconds', 'How long commands ran on a node, start to end.', MetricsDefaults.execBuckets,
      () => live().flatMap((n) => n.figures === undefined ? [] : [{ labels: { node: n.id }, counts: n.figures.execSeconds.counts, sum: n.figures.execSeconds.sum }]))
    registerFamily(r, 'warren_node_output_bytes_total', 'Bytes of stdout and stderr commands wrote on a node.', 'counter', fig((f) => f.outputBytes))
    registerFamily(r, 'warren_node_layer_cache_hit_bytes_total', 'Layer bytes sandboxes read that a node\'s cache already held.', 'counter', fig((f) => f.layerCache.hitBytes))
    registerFamily(r, 'warren_node_layer_cache_miss_bytes_total', 'Layer bytes sandboxes read that a node\'s cache had to fetch first.', 'counter', fig((f) => f.layerCache.missBytes))
    registerFamily(r, 'warren_node_layer_fetched_bytes_total', 'Layer bytes a node fetched from the blob store.', 'counter', fig((f) => f.layerCache.fetchedBytes))
    registerFamily(r, 'warren_node_layer_fetch_failures_total', 'Layer chunk fetches that failed on a node.', 'counter', fig((f) => f.layerCache.fetchFailures))
    registerFamily(r, 'warren_node_layer_cache_bytes', 'Layer chunk bytes on a node\'s disk now.', 'gauge', fig((f) => f.layerCache.cachedBytes))
    registerFamily(r, 'warren_node_layer_cache_layers', 'Layers in a node\'s cache now.', 'gauge', fig((f) => f.layerCache.layers))
    registerFamily(r, 'warren_node_dead_letters_total', 'Messages a node\'s actors could not take, by reason.', 'counter',
      () => live().flatMap((n) => n.figures === undefined ? [] : DEAD_LETTER_REASONS.map((reason) => ({ labels: { node: n.id, reason }, value: n.figures!.deadLetters[reason] }))))
    const boxes = (pick: (d: { actors: number, queued: number, max: number }) => number) => (): Sample[] =>
      live().flatMap((n) => n.figures === undefined ? [] : NODE_ACTOR_KINDS.map((kind) => ({ labels: { node: n.id, kind }, value: pick(n.figures!.mailboxes[kind]) })))
    registerFamily(r, 'warren_node_actors', 'Live actors of a node, by kind.', 'gauge', boxes((d) => d.actors))
    registerFamily(r, 'warren_node_mailbox_depth', 'Messages queued in a node\'s mailboxes, summed by actor kind.', 'gauge', boxes((d) => d.queued))
    registerFamily(r, 'warren_node_mailbox_depth_max', 'The deepest mailbox of each actor kind on a node.', 'gauge', boxes((d) => d.max))
    registerFamily(r, 'warren_node_supervisor_restarts_total', 'Children a node\'s supervisors restarted.', 'counter', fig((f) => f.restarts))
  }
}
