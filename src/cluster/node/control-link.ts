/**
 * ControlLink: the node's connection to the control plane. It dials with the join token,
 * joins the registry (again after every new session, and whenever the registry says the node
 * was declared lost), heartbeats, forwards sandbox end (and pause) events in small batches, and
 * carries the trajectory shipper's batches to `cp/trajectories`. The
 * underlying link reconnects with backoff on its own; this actor only re-joins.
 */
import { Actor } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { createLinkClient, exposeSystem, type LinkClient, type LinkOptionsInput } from '../../transport/index.js'
import type { NodeCapacity } from '../placement/index.js'
import type { SandboxEvent } from '../sandbox/index.js'
import type { ShipAck, ShipBatch } from '../trajectory/index.js'
import type { NodeMessage, SandboxSummary } from './node-agent.js'
import type { NodeFigures } from '../metrics/index.js'

export type ControlLinkMessage =
  | { type: 'event', event: SandboxEvent }
  | { type: 'heartbeat' }
  | { type: 'flush' }
  | { type: 'join' }
  | { type: 'status' }
  /** A batch of trajectory records for the control plane: answered with its acknowledgement. */
  | { type: 'ship', batch: ShipBatch }

export interface ControlLinkOptions {
  url: string
  joinToken: string
  nodeId: string
  capacity: NodeCapacity
  /** Address of the control plane's registry and directory. */
  registry: string
  directory: string
  heartbeatEveryMs?: number
  link?: LinkOptionsInput
  /** The control plane's CA (PEM) for a `wss://` URL whose certificate the system does not trust. */
  ca?: string
  /** Called once the node has joined (tests and `warren node` wait for it). */
  onJoined?: () => void
  /**
   * Called when the link closes, before any join, for a reason no retry can change (TLS refused
   * the control plane's certificate, or the port speaks TLS and the URL did not): `warren node`
   * stops with it instead of retrying for ever.
   */
  onRefused?: (err: Error) => void
  /** Address of the control plane's trajectory store. */
  trajectories?: string
  /** Called after every join (the trajectory shipper resends what is not acknowledged), and when the link ends. */
  onSession?: () => void
  onLinkDown?: () => void
  /** The node's own metrics, carried by every heartbeat (none: heartbeats carry none). */
  figures?: () => Promise<NodeFigures>
}

export const ControlLinkDefaults = {
  /** Time the control plane gets to store a batch of trajectory records. */
  shipTimeoutMs: 10_000
}

export class ControlLink extends Actor<ControlLinkMessage> {
  private link: LinkClient | undefined
  private pending: SandboxEvent[] = []
  private joined = false
  private beats = 0

  constructor (private readonly o: ControlLinkOptions) { super() }

  preStart (): void {
    const system = this.ctx.system
    const nodeId = this.o.nodeId
    // The control plane may reach the node agent and its sandboxes, nothing else.
    const exposed = exposeSystem(system, { allow: (address) => address === `${nodeId}/agent` || address.startsWith(`${nodeId}/sb-`) })
    this.link = createLinkClient({ ...(this.o.link ?? {}), url: this.o.url, token: this.o.joinToken, handler: exposed, ...(this.o.ca !== undefined ? { ca: this.o.ca } : {}) })
    this.link.on('open', ({ resumed }) => { if (!resumed || !this.joined) this.self.tell({ type: 'join' }) })
    this.link.on('close', (reason) => {
      if (!this.joined && (reason?.details as { reason?: unknown } | undefined)?.reason === 'tls') this.o.onRefused?.(reason!)
      this.ctx.fail(reason ?? new Error('control link closed'))
    })
    const every = this.o.heartbeatEveryMs ?? 500
    this.ctx.setTimer('heartbeat', every, { type: 'heartbeat' }, { repeat: true })
  }

  receive (m: ControlLinkMessage): unknown {
    switch (m.type) {
      case 'join':
        this.ctx.answerLater(this.join())
        return undefined
      case 'heartbeat': {
        if (!this.joined || this.link?.state !== 'open') return undefined
        const link = this.link
        // Every tenth beat carries the layers this node caches, for placement's locality.
        const withLayers = this.beats++ % 10 === 0
        const agent = this.ctx.system.lookup<NodeMessage>(`${this.o.nodeId}/agent`)
        const layers = withLayers && agent !== undefined ? agent.ask<string[]>({ type: 'layers' }).catch(() => undefined) : Promise.resolve(undefined)
        const figures = this.o.figures?.().catch(() => undefined) ?? Promise.resolve(undefined)
        void Promise.all([layers, figures]).then(([l, f]) => link.request<{ rejoin: boolean }>(this.o.registry, {
          type: 'heartbeat', nodeId: this.o.nodeId, ...(l !== undefined ? { layers: l } : {}), ...(f !== undefined ? { figures: f } : {})
        }, { timeoutMs: 5000 }))
          .then((r) => { if (r.rejoin) this.self.tell({ type: 'join' }) }, () => {})
        return undefined
      }
      case 'event':
        // Ready is implied by the create's answer; only ends travel, and pauses and resumes (they
        // carry their number), so the wire carries one event per sandbox unless it is paused.
        if (m.event.state !== 'gone' && m.event.state !== 'failed' && m.event.pauseSeq === undefined) return undefined
        this.pending.push(m.event)
        if (this.pending.length === 1) this.ctx.setTimer('flush', 20, { type: 'flush' })
        if (this.pending.length >= 1000) this.flush()
        return undefined
      case 'flush':
        this.flush()
        return undefined
      case 'status':
        return { joined: this.joined, state: this.link?.state }
      case 'ship': {
        if (!this.joined || this.link?.state !== 'open' || this.o.trajectories === undefined) {
          throw createError(ErrorCodes.CONNECTION_CLOSED, 'the node has not joined the control plane')
        }
        return this.ctx.answerLater(this.link.request<ShipAck>(this.o.trajectories, m.batch, { timeoutMs: ControlLinkDefaults.shipTimeoutMs }))
      }
    }
  }

  private async join (): Promise<void> {
    if (this.link === undefined) return
    try {
      // The sandboxes this node runs (some perhaps adopted after a restart) travel with the
      // join, so the control plane's records match the node again.
      const agent = this.ctx.system.lookup<NodeMessage>(`${this.o.nodeId}/agent`)
      const sandboxes = agent === undefined ? [] : await agent.ask<SandboxSummary[]>({ type: 'summaries' }, { timeoutMs: 60_000 })
      await this.link.request(this.o.registry, { type: 'join', nodeId: this.o.nodeId, capacity: this.o.capacity, sandboxes }, { timeoutMs: 10_000 })
      const first = !this.joined
      this.joined = true
      if (first) this.o.onJoined?.()
      this.o.onSession?.()
    } catch {
      this.ctx.setTimer('rejoin', 500, { type: 'join' })
    }
  }

  private flush (): void {
    this.ctx.cancelTimer('flush')
    if (this.pending.length === 0 || this.link === undefined) return
    const events = this.pending
    this.pending = []
    try {
      this.link.tell(this.o.directory, { type: 'events', nodeId: this.o.nodeId, events })
    } catch {
      // Link closed for good: the control plane will declare this node lost and reclaim its records.
    }
  }

  async postStop (): Promise<void> {
    this.o.onLinkDown?.()
    this.flush()
    if (this.link?.state === 'open' && this.joined) {
      await this.link.request(this.o.registry, { type: 'leave', nodeId: this.o.nodeId }, { timeoutMs: 2000 }).catch(() => {})
    }
    this.link?.close()
  }
}

export function createControlLink (options: ControlLinkOptions): () => ControlLink {
  return () => new ControlLink(options)
}
