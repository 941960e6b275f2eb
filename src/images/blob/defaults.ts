/**
 * Every default of the blob store, its server and the node's layer cache, in one object, so a
 * reader sees all the knobs at once and a test overrides exactly the ones it needs.
 */
import { createError, ErrorCodes } from '../../errors.js'

const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB

/** Tunables of the blob HTTP server. */
export interface BlobServerTunables {
  /** Interface to listen on. The control plane passes its own; loopback is the safe default. */
  host: string
  /** Port; 0 picks a free one. */
  port: number
  /** Responses streamed at once; the rest wait in a queue. */
  maxConcurrent: number
  /** Requests waiting for a slot; beyond this the server answers 503 at once instead of piling up. */
  maxQueued: number
}

/** Tunables of a node's layer cache (`createLayerCache`). */
export interface LayerCacheTunables {
  /** Chunk bytes kept on disk before whole unused layers are evicted, least recently used first. */
  maxBytes: number
  /**
   * Time one chunk fetch may take, from asking for a connection slot to the last body byte. The
   * FUSE read waiting on it must answer (EIO) rather than hang a sandbox, so this is a hard bound.
   */
  fetchTimeoutMs: number
  /** Chunk fetches in flight at once per cache (demand reads go before prefetches). */
  fetchConcurrency: number
  /** Chunk fetches one prefetch keeps in flight; lower than `fetchConcurrency` so demand reads find slots. */
  prefetchConcurrency: number
  /** Start a prefetch of the recorded chunks when a layer is opened cold and a record exists. */
  autoPrefetch: boolean
  /** How long after a cold open the chunks read are recorded (ends earlier when the layer is closed). */
  recordWindowMs: number
  /** At most this many chunk indices are recorded per cold start. */
  recordMaxChunks: number
  /** Largest manifest accepted from the store (a 12 GiB layer at 1 MiB chunks is about 900 KiB). */
  maxManifestBytes: number
}

export interface BlobDefaultsShape {
  /**
   * Chunk size of new manifests. 1 MiB: large enough that one HTTP request per chunk is cheap
   * next to its transfer, small enough that a sandbox reading 6–9% of an image does not pull
   * much it never reads. Must be a multiple of `chunkAlignBytes` (EROFS reads whole 4 KiB blocks).
   */
  chunkBytes: number
  minChunkBytes: number
  maxChunkBytes: number
  chunkAlignBytes: number
  server: Readonly<BlobServerTunables>
  cache: Readonly<LayerCacheTunables>
}

/** The defaults; frozen so nobody changes them for everyone by accident. */
export const BlobDefaults: Readonly<BlobDefaultsShape> = Object.freeze({
  chunkBytes: 1 * MiB,
  minChunkBytes: 4 * KiB,
  maxChunkBytes: 64 * MiB,
  chunkAlignBytes: 4 * KiB,
  server: Object.freeze({
    host: '127.0.0.1',
    port: 0,
    maxConcurrent: 64,
    maxQueued: 1024
  }),
  cache: Object.freeze({
    maxBytes: 20 * GiB,
    fetchTimeoutMs: 10_000,
    fetchConcurrency: 8,
    prefetchConcurrency: 2,
    autoPrefetch: true,
    recordWindowMs: 60_000,
    recordMaxChunks: 65_536,
    maxManifestBytes: 64 * MiB
  })
})

/** Drops `undefined` values so `{ ...defaults, ...defined(input) }` keeps the default for them. */
export function defined<T extends object> (input: T): Partial<T> {
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as Partial<T>
}

/**
 * Checks that `value` is an integer in [min, max].
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `what`
 */
export function checkInt (what: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${what} must be an integer in [${min}, ${max}], got ${value}`, { field: what })
  }
}

/**
 * Checks a chunk size: a multiple of the EROFS block within the allowed bounds.
 * @throws WARREN_ERR_INVALID_ARGUMENT
 */
export function checkChunkBytes (chunkBytes: number): void {
  checkInt('chunkBytes', chunkBytes, BlobDefaults.minChunkBytes, BlobDefaults.maxChunkBytes)
  if (chunkBytes % BlobDefaults.chunkAlignBytes !== 0) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `chunkBytes must be a multiple of ${BlobDefaults.chunkAlignBytes}, got ${chunkBytes}`, { field: 'chunkBytes' })
  }
}
