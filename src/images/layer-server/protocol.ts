/**
 * What the node and its layer server say to each other over their link (the transport's msgpack
 * frames on a WebSocket over a Unix socket): requests to the server's `layers` address, and the
 * server's tells of failed reads to the node's `node` address.
 */
import type { CacheMetrics } from '../blob/index.js'

export const LAYERS_ADDRESS = 'layers'
export const NODE_ADDRESS = 'node'

export type LayerServerRequest =
  | { type: 'resolve', digest: string }
  | { type: 'release', digest: string }
  | { type: 'cached' }
  | { type: 'metrics' }
  | { type: 'sync', users: Record<string, number> }
  | { type: 'shutdown' }

/** A read inside a sandbox failed (the sandbox got EIO): told to the node, which says so. */
export interface LayerReadFailure { type: 'read-failed', message: string }

export type { CacheMetrics }

/** Everything the server process needs, passed in its environment (it holds two secrets). */
export interface LayerServerConfig {
  socketPath: string
  /** Clients present this on their link. */
  authToken: string
  cacheDir: string
  mountpoint: string
  /** The blob store and its bearer token (the node join token). */
  baseUrl: string
  blobToken: string
  /** The blob store's CA (PEM) when it serves TLS with a certificate of the operator's. */
  ca?: string
  maxBytes?: number
  /** With no client and no layer in use for this long, the server ends (an orphan of a node that never came back). */
  idleExitMs: number
}

export const LayerServerDefaults = {
  idleExitMs: 5 * 60_000,
  /** A resolve may fetch the layer's manifest: give it time. */
  resolveTimeoutMs: 120_000,
  startTimeoutMs: 20_000,
  /**
   * Before its first client, a server counts as idle only after this long, whatever `idleExitMs`
   * says: the node that started it dials once it listens, which a loaded machine can delay.
   */
  firstClientGraceMs: 30_000,
  /** A new server truncates a log grown past this. */
  maxLogBytes: 4 * 1024 * 1024,
  /** The node refreshes its copy of the cached layer list this often (placement reads it). */
  refreshMs: 5000,
  envVar: 'WARREN_LAYER_SERVER'
}

