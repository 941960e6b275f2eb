/**
 * The cache's counters. Plain numbers: a caller that wants Prometheus reads `snapshot()` in a
 * prom-client collect callback.
 */

export interface CacheMetrics {
  /** Body bytes received from the store, corrupt ones included. */
  bytesFetched: number
  /** Bytes returned by `read`. */
  bytesServed: number
  /** Of `bytesServed`, those already on the node's disk when asked for. */
  bytesHit: number
  /** `bytesHit / bytesServed`; 0 before anything was served. */
  hitRatio: number
  chunksFetched: number
  /** Fetches that failed (timeout, unreachable, bad status or body). */
  fetchFailures: number
  /** Chunks that failed their manifest check (each attempt counts). */
  corruptChunks: number
  /** Chunks fetched by prefetches. */
  prefetchedChunks: number
  /** Layers evicted. */
  evictions: number
  /** Chunk bytes on disk now. */
  cachedBytes: number
  /** Layers in the cache now. */
  layers: number
}

export type CacheCounters = Omit<CacheMetrics, 'hitRatio' | 'cachedBytes' | 'layers'>

/** Fresh counters, all zero. */
export function createCounters (): CacheCounters {
  return { bytesFetched: 0, bytesServed: 0, bytesHit: 0, chunksFetched: 0, fetchFailures: 0, corruptChunks: 0, prefetchedChunks: 0, evictions: 0 }
}

/** The counters plus the derived figures. */
export function snapshot (c: CacheCounters, cachedBytes: number, layers: number): CacheMetrics {
  return { ...c, hitRatio: c.bytesServed === 0 ? 0 : c.bytesHit / c.bytesServed, cachedBytes, layers }
}
