/** The public types of the node's layer cache (implemented in cache.ts). */
import type { EventEmitter } from 'node:events'
import type { WarrenError } from '../../errors.js'
import type { LayerCacheTunables } from './defaults.js'
import type { CacheMetrics } from './metrics.js'

export interface LayerCacheOptions extends Partial<LayerCacheTunables> {
  /** The cache's directory on the node's disk. */
  dir: string
  /** Base URL of the blob store (control plane, static server or bucket). */
  baseUrl: string
  /** The node join token, sent as a bearer token; unset for a store that needs none. */
  token?: string
  /** Extra headers for every request to the store. */
  headers?: Record<string, string>
  /** An `https://` store's CA (PEM), trusted beside the system's roots. */
  ca?: string
}

/** An open layer. Close it when done: an open layer cannot be evicted. */
export interface LayerHandle {
  readonly digest: string
  /** Layer bytes. */
  readonly size: number
  readonly chunkBytes: number
  /**
   * Reads `length` bytes at `offset`; fewer at the end of the layer, none past it (like pread).
   * @throws a WarrenError with `details.errno === 'EIO'` when bytes cannot be fetched or verified
   *         (TIMEOUT, BACKEND_UNAVAILABLE with `details.reason`, NOT_FOUND…); the same read may
   *         succeed later, once the store is back
   */
  read (offset: number, length: number): Promise<Uint8Array>
  /** Releases the layer (after reads in progress settle). Idempotent. */
  close (): Promise<void>
}

export interface PrefetchResult {
  digest: string
  /** Chunks in the record (0 when there is none). */
  chunks: number
  /** Of those, fetched now (the rest were on disk or failed). */
  fetched: number
  failed: number
}

/** A layer the cache holds, for placement ("prefer nodes that cache a sandbox's layers"). */
export interface LayerInfo {
  digest: string
  size: number
  /** Chunk bytes on this node's disk. */
  cachedBytes: number
  inUse: boolean
  lastUsedMs: number
}

export interface LayerCacheEvents {
  /** A manifest (chunk undefined) or chunk fetch failed; the read asking for it rejects with `error`. */
  fetchFailed: [info: { digest: string, chunk: number | undefined, error: WarrenError }]
  /** A chunk did not match its manifest; attempt 1 is refetched, attempt 2 fails the read. */
  corruptChunk: [info: { digest: string, chunk: number, attempt: number }]
  /** A verified chunk could not be stored (it was still served; it is fetched again next time). */
  persistFailed: [info: { digest: string, chunk: number, error: Error }]
  evicted: [info: { digest: string, bytes: number }]
  prefetched: [result: PrefetchResult]
}

export interface LayerCache extends EventEmitter<LayerCacheEvents> {
  /**
   * Opens a layer, fetching its manifest when the node has never held it.
   * @throws INVALID_ARGUMENT for a malformed digest; a blob error when the manifest cannot be had
   */
  open (digest: string): Promise<LayerHandle>
  /**
   * Fetches the chunks the layer's last recorded cold start read and are not on disk. Call
   * without awaiting for a background head start. Chunk failures are counted, not thrown.
   */
  prefetch (digest: string): Promise<PrefetchResult>
  /** Evicts a layer now unless it is in use. @returns whether it is gone */
  evict (digest: string): Promise<boolean>
  /** The layers held. */
  layers (): LayerInfo[]
  metrics (): CacheMetrics
  /** Resolves once background work (durability, eviction, recording, prefetch) has settled. */
  idle (): Promise<void>
  /** Stops fetches (reads in flight reject), writes records, closes files. Handles become unusable. */
  close (): Promise<void>
}
