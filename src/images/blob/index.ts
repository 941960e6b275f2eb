/**
 * The content-addressed blob store and the node side of on-demand layer loading: the public
 * face of src/images/blob. See README.md for the layout and for serving from other stores.
 */
export { BlobDefaults, type BlobServerTunables, type LayerCacheTunables } from './defaults.js'
export { blobKey, digestHex, isDigest, manifestKey } from './digest.js'
export { blobFailureOf, type BlobErrorDetails, type BlobFailure } from './errors.js'
export { chunkCount, chunkSpan, createManifest, hashFileChunks, packChunkHashes, parseManifest, serializeManifest, type ChunkManifest } from './manifest.js'
export { installLayer, pushLayer, storePaths, type PushedLayer, type PushOptions } from './push.js'
export { bearerToken, tokenCheck, type TokenCheck } from './auth.js'
export { parseRange, type RangeResult } from './range.js'
export { createBlobHandler, type BlobHandlerOptions, type BlobRequestHandler, type BlobRequestInfo, type BlobResponseInfo } from './handler.js'
export { createBlobServer, type BlobServer, type BlobServerEvents, type BlobServerOptions } from './server.js'
export { objectUrl, type BlobSource } from './fetch.js'
export type { CacheMetrics } from './metrics.js'
export { createLayerCache } from './cache.js'
export type { LayerCache, LayerCacheEvents, LayerCacheOptions, LayerHandle, LayerInfo, PrefetchResult } from './types.js'
