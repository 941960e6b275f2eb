/**
 * Fixtures for the blob tests: temp dirs, reproducible layer files, a blob store served on
 * 127.0.0.1 with a request log, a gate in front of it that can hold requests, raw HTTP requests
 * (node:http, so paths are sent exactly as written, unnormalised).
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ClientRequest, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createBlobServer, digestHex, pushLayer, tokenCheck, type BlobRequestInfo, type BlobServer, type PushedLayer } from '../../../src/images/blob/index.js'
import type { Cleanup } from '../../support/index.js'

export const TOKEN = 'join-token-for-tests'

/** A fresh temp dir, removed when the test ends. */
export function tempDir (defer: Cleanup['defer'], prefix = 'warren-blob-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** `size` pseudo-random bytes, the same for the same seed (xorshift32). */
export function seededBytes (size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(size)
  let x = (seed >>> 0) || 1
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    out[i] = x & 0xff
  }
  return out
}

/** A seeded PRNG returning integers in [0, n). */
export function prng (seed: number): (n: number) => number {
  let x = (seed >>> 0) || 1
  return (n) => {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    return x % n
  }
}

export function sha256Hex (bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** Writes `bytes` as a layer file and pushes it into the store at `root`. */
export async function pushBytes (dir: string, root: string, name: string, bytes: Uint8Array, chunkBytes: number): Promise<PushedLayer> {
  const file = join(dir, name)
  writeFileSync(file, bytes)
  return await pushLayer(root, file, { chunkBytes })
}

export interface StoreFixture {
  root: string
  readonly server: BlobServer
  readonly url: string
  /** Every request the server saw (since the last `reset`), across restarts. */
  requests: BlobRequestInfo[]
  /** Blob requests for a layer, optionally only those for chunk `index` of `chunkBytes`. */
  blobRequests (digest: string, chunk?: { index: number, chunkBytes: number }): BlobRequestInfo[]
  manifestRequests (digest: string): BlobRequestInfo[]
  /** Stops the server (connections dropped). */
  stop (): Promise<void>
  /** A new server on the same port. */
  restart (): Promise<void>
}

/** Serves `root` on 127.0.0.1 (a free port), requiring TOKEN; stopped when the test ends. */
export async function startStore (defer: Cleanup['defer'], root: string, options: { maxConcurrent?: number, maxQueued?: number } = {}): Promise<StoreFixture> {
  let server: BlobServer
  const fixture: StoreFixture = {
    root,
    get server () { return server },
    get url () { return server.url },
    requests: [],
    blobRequests (digest, chunk) {
      const path = `/blobs/sha256/${digestHex(digest)}`
      return fixture.requests.filter((r) => r.url === path && (chunk === undefined || (r.range ?? '').startsWith(`bytes=${chunk.index * chunk.chunkBytes}-`)))
    },
    manifestRequests (digest) {
      return fixture.requests.filter((r) => r.url === `/manifests/sha256/${digestHex(digest)}.json`)
    },
    async stop () { await server.close() },
    async restart () {
      const port = server.port
      await server.close()
      server = make()
      await server.listen(port)
    }
  }
  const make = (): BlobServer => {
    const s = createBlobServer({ root, authorize: tokenCheck(TOKEN), ...options })
    s.on('request', (info) => fixture.requests.push(info))
    return s
  }
  server = make()
  await server.listen()
  defer(() => server.close())
  return fixture
}

export interface Gate {
  url: string
  /** While true, blob requests are held unanswered (the store looks hung). */
  hold: boolean
  /** Requests currently held. */
  held: number
  close (): Promise<void>
}

/**
 * An HTTP server forwarding to `upstream`, which can hold blob requests forever: a store that
 * accepts connections and never answers. Closed when the test ends.
 */
export async function startGate (defer: Cleanup['defer'], upstream: () => string): Promise<Gate> {
  const gate: Gate = { url: '', hold: false, held: 0, close: async () => {} }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (gate.hold && (req.url ?? '').startsWith('/blobs/')) {
      gate.held++
      res.once('close', () => { gate.held-- })
      return
    }
    const up = new URL(upstream())
    const fwd = request({ host: up.hostname, port: up.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers)
      r.pipe(res)
    })
    fwd.once('error', () => res.destroy())
    req.pipe(fwd)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  gate.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  gate.close = () => new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })
  defer(() => gate.close())
  return gate
}

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** A request with the path sent byte for byte as given; resolves with the whole response. */
export function rawRequest (base: string, path: string, init: { method?: string, headers?: Record<string, string> } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = openRequest(base, path, init, (res) => {
      const parts: Buffer[] = []
      res.on('data', (b: Buffer) => parts.push(b))
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }))
      res.once('error', reject)
    })
    req.once('error', reject)
  })
}

/** A request whose response is not read: resolves once its headers are in. */
export function startRequest (base: string, path: string, init: { method?: string, headers?: Record<string, string> } = {}): Promise<{ req: ClientRequest, res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = openRequest(base, path, init, (res) => resolve({ req, res }))
    req.once('error', reject)
  })
}

function openRequest (base: string, path: string, init: { method?: string, headers?: Record<string, string> }, onResponse: (res: IncomingMessage) => void): ClientRequest {
  const u = new URL(base)
  // A fresh connection per request: keep-alive reuse would mix the tests' requests.
  const req = request({ host: u.hostname, port: u.port, path, method: init.method ?? 'GET', headers: init.headers, agent: false }, onResponse)
  req.end()
  return req
}

export const auth = { authorization: `Bearer ${TOKEN}` }
