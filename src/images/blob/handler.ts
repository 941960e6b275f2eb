/**
 * The blob store's request handler: GET/HEAD of the object keys under a root directory, with
 * single Range requests, a bearer token, strict paths and a bound on responses in flight. It is
 * a plain (req, res) function so the control plane can mount it on its own HTTP server.
 *
 * Order of checks: token, method, path. An unauthenticated peer learns nothing, not even which
 * paths exist. Paths are matched on the raw request target against the two key patterns and
 * nothing else — no decoding, no normalisation — so there is nothing to traverse with.
 */
import { constants } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { bearerToken, type TokenCheck } from './auth.js'
import { BlobDefaults, checkInt } from './defaults.js'
import { Limiter, type Release } from './limiter.js'
import { parseRange } from './range.js'

export interface BlobHandlerOptions {
  /** The store's root directory (the layout of push.ts). */
  root: string
  /** Decides whether a bearer token may read; pass `tokenCheck(joinToken)` or the control plane's own check. */
  authorize: TokenCheck
  /** Responses streamed at once (default `BlobDefaults.server.maxConcurrent`). */
  maxConcurrent?: number
  /** Requests waiting for a slot before the server answers 503 (default `BlobDefaults.server.maxQueued`). */
  maxQueued?: number
  /** Called as each request arrives, before any check. */
  onRequest?: (info: BlobRequestInfo) => void
  /** Called when each response ends (or the client went away). */
  onResponse?: (info: BlobResponseInfo) => void
}

export interface BlobRequestInfo {
  method: string
  /** The raw request target. */
  url: string
  range: string | undefined
}

export interface BlobResponseInfo extends BlobRequestInfo {
  status: number
  /** Body bytes the response promised (Content-Length); fewer went out if the client left early. */
  bytes: number
}

export type BlobRequestHandler = (req: IncomingMessage, res: ServerResponse) => void

const BLOB_PATH = /^\/blobs\/sha256\/([0-9a-f]{64})$/
const MANIFEST_PATH = /^\/manifests\/sha256\/([0-9a-f]{64})\.json$/

interface Target {
  kind: 'blob' | 'manifest'
  hex: string
  file: string
}

/** The file a raw request target names, or undefined when it is not exactly an object key. */
export function resolveTarget (root: string, url: string): Target | undefined {
  const blob = BLOB_PATH.exec(url)
  if (blob !== null) return { kind: 'blob', hex: blob[1]!, file: join(root, 'blobs', 'sha256', blob[1]!) }
  const manifest = MANIFEST_PATH.exec(url)
  if (manifest !== null) return { kind: 'manifest', hex: manifest[1]!, file: join(root, 'manifests', 'sha256', `${manifest[1]!}.json`) }
  return undefined
}

/**
 * Creates the handler.
 * @returns a function for `http.createServer` or for a route of an existing server
 */
export function createBlobHandler (options: BlobHandlerOptions): BlobRequestHandler {
  const maxConcurrent = options.maxConcurrent ?? BlobDefaults.server.maxConcurrent
  const maxQueued = options.maxQueued ?? BlobDefaults.server.maxQueued
  checkInt('maxConcurrent', maxConcurrent, 1)
  checkInt('maxQueued', maxQueued, 0)
  const limiter = new Limiter(maxConcurrent, maxQueued)

  async function handle (req: IncomingMessage, res: ServerResponse, info: BlobRequestInfo, sent: { bytes: number }): Promise<void> {
    const token = bearerToken(req.headers.authorization)
    let allowed = false
    if (token !== undefined) {
      try { allowed = (await options.authorize(token)) === true } catch { allowed = false }
    }
    if (!allowed) return plain(res, 401, 'unauthorized\n', { 'WWW-Authenticate': 'Bearer realm="warren-blobs"' })
    if (info.method !== 'GET' && info.method !== 'HEAD') return plain(res, 405, 'method not allowed\n', { Allow: 'GET, HEAD' })
    const target = resolveTarget(options.root, info.url)
    if (target === undefined) return plain(res, 404, 'not found\n')

    // A client that leaves while queued gives its place up.
    const gone = new AbortController()
    const onClose = (): void => gone.abort()
    res.once('close', onClose)
    let release: Release
    try {
      release = await limiter.acquire('high', gone.signal).granted
    } catch {
      if (!res.destroyed) plain(res, 503, 'busy\n', { 'Retry-After': '1' })
      return
    } finally {
      res.off('close', onClose)
    }
    try {
      await serveFile(req, res, target, sent)
    } finally {
      release()
    }
  }

  return (req, res) => {
    const info: BlobRequestInfo = { method: req.method ?? '', url: req.url ?? '', range: req.headers.range }
    const sent = { bytes: 0 }
    res.once('close', () => options.onResponse?.({ ...info, status: res.statusCode, bytes: sent.bytes }))
    options.onRequest?.(info)
    handle(req, res, info, sent).catch(() => {
      if (!res.headersSent) plain(res, 500, 'internal error\n')
      else res.destroy()
    })
  }
}

async function serveFile (req: IncomingMessage, res: ServerResponse, target: Target, sent: { bytes: number }): Promise<void> {
  let fh: FileHandle | undefined
  try {
    // O_NOFOLLOW: a symlink planted in the store is not followed out of it.
    fh = await open(target.file, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTDIR' || code === 'EISDIR') return plain(res, 404, 'not found\n')
    throw err
  }
  try {
    const st = await fh.stat()
    if (!st.isFile()) return plain(res, 404, 'not found\n')
    const headers: Record<string, string> = {
      'Accept-Ranges': 'bytes',
      'Content-Type': target.kind === 'blob' ? 'application/octet-stream' : 'application/json'
    }
    if (target.kind === 'blob') {
      // A blob's name is its content: it never changes, so it may be cached forever.
      headers.ETag = `"sha256:${target.hex}"`
      headers['Cache-Control'] = 'private, max-age=31536000, immutable'
    }
    const range = parseRange(req.headers.range, st.size)
    if (range.kind === 'unsatisfiable') return plain(res, 416, 'range not satisfiable\n', { ...headers, 'Content-Range': `bytes */${st.size}` })
    const start = range.kind === 'partial' ? range.start : 0
    const end = range.kind === 'partial' ? range.end : st.size - 1
    const length = end - start + 1
    if (range.kind === 'partial') headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`
    headers['Content-Length'] = String(length)
    res.writeHead(range.kind === 'partial' ? 206 : 200, headers)
    sent.bytes = length
    if (req.method === 'HEAD' || length === 0) { res.end(); return }
    const stream = fh.createReadStream({ start, end, autoClose: true })
    fh = undefined // the stream owns it now and closes it
    // A client leaving mid-body rejects the pipeline; the stream is destroyed either way.
    await pipeline(stream, res).catch(() => undefined)
  } finally {
    await fh?.close()
  }
}

function plain (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)) })
  res.end(body)
}
