/**
 * Layer digests and the object keys they map to. The keys are the whole contract between a
 * store and its readers: any server holding these paths is a blob store.
 *
 *   blobs/sha256/<hex>              the layer image
 *   manifests/sha256/<hex>.json     its chunk manifest (<hex> is the layer's digest)
 */
import { createHash } from 'node:crypto'
import { createError, ErrorCodes } from '../../errors.js'

const DIGEST_RE = /^sha256:([0-9a-f]{64})$/

/** True when `value` is a `sha256:<64 lowercase hex>` digest. */
export function isDigest (value: unknown): value is string {
  return typeof value === 'string' && DIGEST_RE.test(value)
}

/**
 * The hex part of a digest.
 * @throws WARREN_ERR_INVALID_ARGUMENT when `digest` is not `sha256:<64 lowercase hex>`
 */
export function digestHex (digest: string): string {
  const m = DIGEST_RE.exec(digest)
  if (m === null) throw createError(ErrorCodes.INVALID_ARGUMENT, `not a sha256 digest: ${JSON.stringify(digest).slice(0, 100)}`, { field: 'digest' })
  return m[1]!
}

/** The object key of a layer, relative to the store's base URL or root directory. */
export function blobKey (digest: string): string {
  return `blobs/sha256/${digestHex(digest)}`
}

/** The object key of a layer's chunk manifest. */
export function manifestKey (digest: string): string {
  return `manifests/sha256/${digestHex(digest)}.json`
}

/** sha256 of some bytes as `sha256:<hex>`. */
export function sha256Digest (bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`
}
