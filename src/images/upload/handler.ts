/**
 * The HTTP face of uploads, mounted on the control plane's port beside the blob reads:
 *
 *   POST   /uploads/sha256/<hex>          begin or resume: body {"kind", "manifest"}; answers an UploadStatus
 *   PATCH  /uploads/sha256/<hex>          a run of whole chunks; header Upload-Offset: <byte offset>
 *   POST   /uploads/sha256/<hex>/commit   check the whole digest, put the layer in the store
 *   DELETE /uploads/sha256/<hex>          abort: the staged bytes go
 *
 * Every request carries `Authorization: Bearer <API key>` of a key that may push. Order of
 * checks: token, then the request. Paths are matched on the raw target, nothing decoded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createError, ErrorCodes } from '../../errors.js'
import { bearerToken, parseManifest } from '../blob/index.js'
import { BLOB_KINDS, type BlobKind } from '../names.js'
import { readBody, sendError, sendJson } from './http.js'
import { Uploads, type UploadsOptions } from './uploads.js'

/**
 * Who a token belongs to, when it may push, and the kinds it may push (an operator's key the
 * layer kinds; a node's join token what nodes make: snapshots and trajectory records).
 * @throws WARREN_ERR_UNAUTHENTICATED for a token that is no live key; WARREN_ERR_FORBIDDEN for
 *   a key without the scope to push
 */
export type UploadAuth = (token: string) => Promise<{ tenant: string, kinds: readonly BlobKind[] }>

export interface UploadHandlerOptions extends UploadsOptions {
  authenticate: UploadAuth
  /** Told of every request refused (a bad key among them), before its answer goes. */
  onRefused?: (err: unknown, req: IncomingMessage) => void
}

export interface UploadHandler {
  /** Handles a request whose target starts with `/uploads/`. */
  handle (req: IncomingMessage, res: ServerResponse): void
  readonly uploads: Uploads
  close (): void
}

const PATH = /^\/uploads\/sha256\/([0-9a-f]{64})(\/commit)?$/

/** True when a request target is the upload handler's. */
export function isUploadPath (url: string | undefined): boolean {
  return url !== undefined && url.startsWith('/uploads/')
}

export function createUploadHandler (options: UploadHandlerOptions): UploadHandler {
  const uploads = new Uploads(options)
  const t = uploads.tunables
  let inFlight = 0

  async function route (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const token = bearerToken(req.headers.authorization)
    if (token === undefined) throw createError(ErrorCodes.UNAUTHENTICATED, 'an upload needs Authorization: Bearer <API key>')
    const { tenant, kinds } = await options.authenticate(token)
    const m = PATH.exec(req.url ?? '')
    if (m === null) throw createError(ErrorCodes.NOT_FOUND, 'no such upload path: /uploads/sha256/<hex>[/commit]', { field: 'path' })
    const digest = `sha256:${m[1]!}`
    const method = req.method ?? ''
    if (m[2] !== undefined) {
      if (method !== 'POST') throw createError(ErrorCodes.INVALID_ARGUMENT, `${method} of a commit: use POST`, { field: 'method' })
      return sendJson(res, 200, await uploads.commit(tenant, digest))
    }
    switch (method) {
      case 'POST': {
        const { kind, manifest } = parseBegin(await readBody(req, t.maxRequestBytes, t.requestTimeoutMs), digest)
        if (!kinds.includes(kind)) throw createError(ErrorCodes.FORBIDDEN, `this token may push ${kinds.join(', ')}, not ${kind}`, { field: 'kind' })
        return sendJson(res, 200, await uploads.begin(tenant, manifest, kind))
      }
      case 'PATCH': {
        const offset = Number(req.headers['upload-offset'])
        if (!/^\d{1,16}$/.test(String(req.headers['upload-offset'] ?? ''))) throw createError(ErrorCodes.INVALID_ARGUMENT, 'Upload-Offset must be the byte offset of the first chunk in the body', { field: 'offset' })
        const body = await readBody(req, t.maxRequestBytes, t.requestTimeoutMs)
        return sendJson(res, 200, await uploads.write(tenant, digest, offset, body))
      }
      case 'DELETE':
        if (!await uploads.abort(tenant, digest)) throw createError(ErrorCodes.NOT_FOUND, `no upload of ${digest} is open`, { field: 'digest' })
        res.writeHead(204).end()
        return
      default:
        throw createError(ErrorCodes.INVALID_ARGUMENT, `${method} is not an upload method (POST, PATCH, DELETE)`, { field: 'method' })
    }
  }

  return {
    uploads,
    close: () => uploads.close(),
    handle (req, res) {
      if (inFlight >= t.maxConcurrentRequests) {
        sendError(res, createError(ErrorCodes.OVERLOADED, 'the blob store is taking as many uploads as it can; try again shortly', { retryAfterMs: 1000 }))
        req.resume()
        return
      }
      inFlight++
      route(req, res).catch((err: unknown) => {
        options.onRefused?.(err, req)
        sendError(res, err)
      }).finally(() => {
        inFlight--
        // A body nobody read (an early refusal) is drained or the connection dropped, never left hanging.
        if (req.complete) return
        if (res.writableFinished) req.destroy()
        else res.once('finish', () => req.destroy())
      })
    }
  }
}

/** The body of a begin: `{ "kind": …, "manifest": { digest, size, chunkBytes, chunks } }` for this digest. */
function parseBegin (body: Buffer, digest: string): { kind: BlobKind, manifest: ReturnType<typeof parseManifest> } {
  let raw: unknown
  try { raw = JSON.parse(body.toString('utf8')) } catch { throw createError(ErrorCodes.INVALID_ARGUMENT, 'a begin\'s body is JSON: {"kind", "manifest"}', { field: 'body' }) }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'a begin\'s body is a JSON object {"kind", "manifest"}', { field: 'body' })
  const { kind, manifest } = raw as { kind?: unknown, manifest?: unknown }
  if (typeof kind !== 'string' || !(BLOB_KINDS as readonly string[]).includes(kind)) throw createError(ErrorCodes.INVALID_ARGUMENT, `kind must be one of ${BLOB_KINDS.join(', ')}`, { field: 'kind' })
  return { kind: kind as BlobKind, manifest: parseManifest(JSON.stringify(manifest ?? null), digest) }
}
