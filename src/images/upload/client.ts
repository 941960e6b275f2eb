/**
 * The client side of uploads: a layer file pushed to a control plane's blob store over HTTP,
 * from any machine that can reach its port. The manifest is made here (one pass over the file),
 * the begin says which chunks the store still needs, and only those are sent, in runs of at
 * most the store's request size. An interrupted push run again therefore sends only what the
 * store does not hold yet; a layer the store holds already sends nothing.
 */
import { open } from 'node:fs/promises'
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { createError, ErrorCodes, fromWireError, isWarrenError, type WarrenError } from '../../errors.js'
import { tlsRefusal, trustList } from '../../transport/tls.js'
import { BlobDefaults, chunkSpan, hashFileChunks, type ChunkManifest } from '../blob/index.js'
import type { BlobKind } from '../names.js'
import type { UploadStatus } from './uploads.js'

export interface HttpPushOptions {
  /** The control plane's URL: `ws://`/`wss://` as the SDK's config has it, or `http(s)://`. */
  url: string
  /** An API key that may push (admin or `image:push`). */
  token: string
  kind: BlobKind
  /** Bytes per manifest chunk (default `BlobDefaults.chunkBytes`). */
  chunkBytes?: number
  /** Told after each request that stored bytes. */
  onProgress?: (sentBytes: number, totalBytes: number) => void
  /** Retries of a request that met a busy store or a broken connection. */
  retries?: number
  /** An `https://` store's CA (PEM), trusted beside the system's roots. */
  ca?: string
}

export interface HttpPushed {
  digest: string
  size: number
  manifest: ChunkManifest
  /** Bytes this push sent (less than `size` when it resumed, 0 when the store had the layer). */
  sentBytes: number
  /** True when the store held the whole layer before this push. */
  existed: boolean
}

export const HttpPushDefaults = {
  retries: 5,
  retryDelayMs: 500,
  /** One request's time, from sending to the last byte of its answer. */
  requestTimeoutMs: 120_000
}

/** `http(s)://host:port` of a control plane URL. */
export function httpBase (url: string): string {
  return url.replace(/^ws(s?):\/\//, 'http$1://').replace(/\/+$/, '')
}

/**
 * Pushes a layer image file to the blob store at `options.url`, with its chunk manifest.
 * @throws the store's WarrenError (UNAUTHENTICATED, FORBIDDEN, INVALID_ARGUMENT naming the field,
 *   QUOTA…), or CONNECTION_CLOSED when it cannot be reached
 */
export async function pushLayerOverHttp (file: string, options: HttpPushOptions): Promise<HttpPushed> {
  const manifest = await hashFileChunks(file, options.chunkBytes ?? BlobDefaults.chunkBytes)
  const base = `${httpBase(options.url)}/uploads/sha256/${manifest.digest.slice('sha256:'.length)}`
  // node:http rather than fetch: it sends an 8 MiB body about four times faster here.
  const agent = base.startsWith('https:') ? new HttpsAgent({ keepAlive: true, maxSockets: 1, ...(options.ca !== undefined ? { ca: trustList(options.ca) } : {}) }) : new HttpAgent({ keepAlive: true, maxSockets: 1 })
  const call = (method: string, url: string, body: Uint8Array | string, headers: Record<string, string> = {}): Promise<unknown> =>
    request(method, url, body, { authorization: `Bearer ${options.token}`, ...headers }, options.retries ?? HttpPushDefaults.retries, agent)
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        return await pushWith(file, manifest, options, base, call)
      } catch (err) {
        // Another push of the same bytes (a node recording one output twice at once) committed
        // the upload this one was sending into: begun again, the store holds them already.
        if (attempt >= 2 || !isWarrenError(err, ErrorCodes.NOT_FOUND) || err.details?.field !== 'digest') throw err
      }
    }
  } finally {
    agent.destroy()
  }
}

type Call = (method: string, url: string, body: Uint8Array | string, headers?: Record<string, string>) => Promise<unknown>

/** The begin, the missing runs and the commit of one push. */
async function pushWith (file: string, manifest: ChunkManifest, options: HttpPushOptions, base: string, call: Call): Promise<HttpPushed> {
  const status = await call('POST', base, JSON.stringify({ kind: options.kind, manifest }), { 'content-type': 'application/json' }) as UploadStatus
  if (status.state === 'stored') return { digest: manifest.digest, size: manifest.size, manifest, sentBytes: 0, existed: true }
  const perRequest = Math.max(1, Math.floor(status.maxRequestBytes / manifest.chunkBytes))
  let sent = 0
  const fh = await open(file, 'r')
  try {
    for (const [from, to] of status.missing) {
      for (let i = from; i < to; i += perRequest) {
        const start = chunkSpan(manifest, i).start
        const end = chunkSpan(manifest, Math.min(to, i + perRequest) - 1).end
        const bytes = Buffer.allocUnsafe(end - start)
        let filled = 0
        while (filled < bytes.length) {
          const { bytesRead } = await fh.read(bytes, filled, bytes.length - filled, start + filled)
          if (bytesRead === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `${file} shrank while it was pushed`, { field: 'file' })
          filled += bytesRead
        }
        await call('PATCH', base, bytes, { 'upload-offset': String(start), 'content-type': 'application/octet-stream' })
        sent += bytes.length
        options.onProgress?.(sent, manifest.size)
      }
    }
  } finally {
    await fh.close()
  }
  await call('POST', `${base}/commit`, '')
  return { digest: manifest.digest, size: manifest.size, manifest, sentBytes: sent, existed: false }
}

/** One exchange: the status and the answer's text. Redirects are not followed: the key goes nowhere else. */
function exchange (method: string, url: string, body: Uint8Array | string, headers: Record<string, string>, agent: HttpAgent): Promise<{ status: number, text: string }> {
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest
    const req = send(url, { method, agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, timeout: HttpPushDefaults.requestTimeoutMs }, (res: IncomingMessage) => {
      const parts: Buffer[] = []
      res.on('data', (b: Buffer) => parts.push(b))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`no answer within ${HttpPushDefaults.requestTimeoutMs} ms`)))
    req.on('error', reject)
    req.end(body)
  })
}

/** One request, retried when the store is busy or the connection broke; an answered refusal is thrown at once. */
async function request (method: string, url: string, body: Uint8Array | string, headers: Record<string, string>, retries: number, agent: HttpAgent): Promise<unknown> {
  for (let attempt = 0; ; attempt++) {
    let res: { status: number, text: string }
    try {
      res = await exchange(method, url, body, headers, agent)
    } catch (err) {
      // An untrusted certificate stays untrusted: said at once, not after the retries.
      const refused = tlsRefusal(err, url)
      if (refused !== undefined) throw refused
      if (attempt < retries) { await sleep(HttpPushDefaults.retryDelayMs * (attempt + 1)); continue }
      throw createError(ErrorCodes.CONNECTION_CLOSED, `cannot reach the blob store at ${url}: ${(err as Error).message}`, { url })
    }
    const text = res.text
    if (res.status >= 200 && res.status < 300) return text === '' ? undefined : JSON.parse(text)
    const error = wireError(res.status, text)
    // Busy, or past the tenant's request rate (a push is many requests): wait as told, and go on.
    const waitable = error.code === ErrorCodes.OVERLOADED || (error.code === ErrorCodes.QUOTA && error.details?.quota === 'requests')
    if (waitable && attempt < retries) {
      const after = error.details?.retryAfterMs
      await sleep(typeof after === 'number' ? Math.min(after, 10_000) : HttpPushDefaults.retryDelayMs)
      continue
    }
    throw error
  }
}

function wireError (status: number, text: string): WarrenError {
  try {
    const wire = JSON.parse(text) as unknown
    if (wire !== null && typeof wire === 'object' && 'code' in wire) return fromWireError(wire)
  } catch { /* not one of ours: described below */ }
  return createError(status === 401 ? ErrorCodes.UNAUTHENTICATED : ErrorCodes.INTERNAL, `the blob store answered ${status}: ${text.slice(0, 200)}`, { status })
}

function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
