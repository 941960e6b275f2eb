/**
 * The fetch side of the blob store: manifests and chunk ranges over HTTP, with Node's global
 * `fetch` (undici: pooled keep-alive connections, AbortSignal for the deadline). It only needs a
 * base URL holding the object keys, so the control plane, a static HTTP server or an
 * S3-compatible bucket all serve.
 *
 * Redirects are not followed: the token must never travel to a host it was not meant for.
 */
import { fetchTrusting, tlsRefusal } from '../../transport/tls.js'
import { blobError } from './errors.js'
import { blobKey, manifestKey } from './digest.js'
import { chunkSpan, parseManifest, type ChunkManifest } from './manifest.js'

/** Where and how to fetch. */
export interface BlobSource {
  /** Base URL of the store; the object keys are resolved under it (a path prefix is kept). */
  baseUrl: string
  /** Sent as `Authorization: Bearer <token>` when set; leave unset for a store that authorizes otherwise. */
  token?: string
  /** Extra request headers (a gateway's own credentials, say). */
  headers?: Record<string, string>
  /** An `https://` store's CA (PEM), trusted beside the system's roots. */
  ca?: string
}

/** One fetch per source with a CA (its own connection pool), made at its first request. */
const trusting = new WeakMap<BlobSource, typeof fetch>()

function fetchFor (source: BlobSource): typeof fetch {
  if (source.ca === undefined) return fetch
  let f = trusting.get(source)
  if (f === undefined) { f = fetchTrusting(source.ca); trusting.set(source, f) }
  return f
}

/** The URL of an object key under a base URL, keeping the base's path prefix. */
export function objectUrl (baseUrl: string, key: string): string {
  return new URL(key, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).toString()
}

/**
 * Runs `fn` with a signal that aborts after `ms` or when `parent` aborts, and turns those aborts
 * into a coded TIMEOUT or `closed` error. Errors `fn` throws for other reasons pass through.
 * @param what details for the error (digest, chunk…)
 */
export async function withDeadline<T> (ms: number, parent: AbortSignal | undefined, what: Record<string, unknown>, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => { timedOut = true; ac.abort() }, ms)
  const onParent = (): void => ac.abort()
  if (parent?.aborted === true) ac.abort()
  parent?.addEventListener('abort', onParent, { once: true })
  try {
    return await fn(ac.signal)
  } catch (err) {
    if (timedOut) throw blobError('timeout', `the blob store did not answer within ${ms} ms`, { ...what, timeoutMs: ms })
    if (parent?.aborted === true) throw blobError('closed', 'the layer cache was closed', what)
    throw err
  } finally {
    clearTimeout(timer)
    parent?.removeEventListener('abort', onParent)
  }
}

/** Byte range `[start, end)` of an object of `total` bytes. */
interface WantRange { start: number, end: number, total: number }

/**
 * Fetches an object or a byte range of it.
 * @param range when given, exactly those bytes, and the store must honour Range
 * @param maxBytes without a range, a larger body is refused
 * @throws blob errors: unreachable, status (with the HTTP status's code), no-range, bad-body;
 *         an abort of `signal` propagates as is (see withDeadline)
 */
export async function fetchObject (source: BlobSource, key: string, signal: AbortSignal, range: WantRange | undefined, maxBytes: number): Promise<Uint8Array> {
  const url = objectUrl(source.baseUrl, key)
  const headers: Record<string, string> = { ...source.headers }
  if (source.token !== undefined) headers.authorization = `Bearer ${source.token}`
  if (range !== undefined) headers.range = `bytes=${range.start}-${range.end - 1}`
  let res: Response
  try {
    res = await fetchFor(source)(url, { headers, signal, redirect: 'manual' })
  } catch (err) {
    if (signal.aborted) throw err
    const refused = tlsRefusal(err, url)
    if (refused !== undefined) throw blobError('unreachable', refused.message, { url, cause: refused.details?.cause, tls: true })
    throw blobError('unreachable', `cannot reach the blob store at ${url}: ${describeCause(err)}`, { url, cause: describeCause(err) })
  }
  const drop = (): void => { res.body?.cancel().catch(() => undefined) }
  const wholeAsked = range !== undefined && range.start === 0 && range.end === range.total
  if (range !== undefined && res.status === 206) {
    const cr = res.headers.get('content-range') ?? ''
    const want = `bytes ${range.start}-${range.end - 1}/`
    const total = cr.startsWith(want) ? cr.slice(want.length) : undefined
    if (total === undefined || (total !== '*' && Number(total) !== range.total)) {
      drop()
      throw blobError('bad-body', `the blob store sent Content-Range "${cr}" for ${want}${range.total} of ${url}`, { url, contentRange: cr })
    }
  } else if (res.status === 200 && range !== undefined && !wholeAsked) {
    drop()
    throw blobError('no-range', `the blob store at ${url} ignored the Range header (200 instead of 206): it must honour Range`, { url })
  } else if (res.status !== 200) {
    drop()
    throw blobError('status', `the blob store answered ${res.status} ${res.statusText} for ${url}`, { url, status: res.status })
  }
  const expect = range === undefined ? undefined : range.end - range.start
  return await readBody(res, url, signal, expect, maxBytes)
}

/** Reads a body of exactly `expect` bytes (or at most `maxBytes`), without growing past it. */
async function readBody (res: Response, url: string, signal: AbortSignal, expect: number | undefined, maxBytes: number): Promise<Uint8Array> {
  const limit = expect ?? maxBytes
  const parts: Uint8Array[] = []
  const out = expect === undefined ? undefined : Buffer.allocUnsafe(expect)
  let got = 0
  if (res.body === null) {
    if (expect !== undefined && expect !== 0) throw blobError('bad-body', `empty body from ${url}, expected ${expect} bytes`, { url })
    return new Uint8Array(0)
  }
  const reader = res.body.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (got + value.length > limit) {
        await reader.cancel().catch(() => undefined)
        throw blobError('bad-body', `more than ${limit} bytes from ${url}`, { url, limit })
      }
      if (out !== undefined) out.set(value, got)
      else parts.push(value)
      got += value.length
    }
  } catch (err) {
    if (signal.aborted || (err as { details?: { reason?: string } }).details?.reason === 'bad-body') throw err
    throw blobError('unreachable', `the connection to ${url} broke mid-body: ${describeCause(err)}`, { url, cause: describeCause(err) })
  }
  if (expect !== undefined && got !== expect) throw blobError('bad-body', `${got} bytes from ${url}, expected ${expect}`, { url, got, expect })
  return out ?? Buffer.concat(parts)
}

/** The most useful words of a fetch failure: undici hides the socket error in `cause`. */
function describeCause (err: unknown): string {
  const cause = (err as { cause?: { code?: unknown, message?: unknown } }).cause
  if (typeof cause?.code === 'string') return cause.code
  if (typeof cause?.message === 'string') return cause.message
  return err instanceof Error ? err.message : String(err)
}

/**
 * Fetches and checks a layer's manifest.
 * @throws a `bad-manifest` blob error when it does not parse or describes another layer
 */
export async function fetchManifest (source: BlobSource, digest: string, signal: AbortSignal, maxBytes: number): Promise<ChunkManifest> {
  const bytes = await fetchObject(source, manifestKey(digest), signal, undefined, maxBytes)
  try {
    return parseManifest(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'), digest)
  } catch (err) {
    throw blobError('bad-manifest', `manifest of ${digest}: ${(err as Error).message}`, { digest })
  }
}

/** Fetches chunk `index` of a layer (unverified: the caller checks it against the manifest). */
export function fetchChunk (source: BlobSource, manifest: Pick<ChunkManifest, 'digest' | 'size' | 'chunkBytes'>, index: number, signal: AbortSignal): Promise<Uint8Array> {
  const { start, end } = chunkSpan(manifest, index)
  return fetchObject(source, blobKey(manifest.digest), signal, { start, end, total: manifest.size }, end - start)
}
