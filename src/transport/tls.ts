/**
 * TLS for the one port: what a server serves (its certificate and key, checked before it listens)
 * and what a client trusts (a CA beside the system's roots, for a control plane whose certificate
 * an operator made). Every client of the port — the WebSocket link, the node's blob fetches and
 * pushes, the CLI's uploads — takes the same `ca` and reports a refused certificate the same way:
 * WARREN_ERR_CONNECTION_CLOSED with `details.reason: 'tls'` and OpenSSL's code as `details.cause`,
 * at once, since no retry can make an untrusted certificate trusted.
 */
import { readFileSync } from 'node:fs'
import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { Socket } from 'node:net'
import { createSecureContext, rootCertificates } from 'node:tls'
import { createError, ErrorCodes, type WarrenError } from '../errors.js'

/** A CA as callers give it: PEM text, or the path of a PEM file. */
export type CaInput = string | Buffer

/**
 * What a client trusts given `ca`: the system's roots and `ca` (Node's `ca` option replaces the
 * roots, and a control plane behind a public certificate must keep working with a CA given).
 */
export function trustList (ca: string): string[] {
  return [...rootCertificates, ca]
}

/** A server's certificate and key, PEM. */
export interface TlsServerConfig { cert: string, key: string }

/** OpenSSL's verdicts on a peer's certificate: none of them is cured by trying again. */
const VERIFY_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'INVALID_CA', 'ERR_TLS_CERT_ALTNAME_INVALID',
  'HOSTNAME_MISMATCH', 'CERT_REVOKED', 'ERR_SSL_WRONG_VERSION_NUMBER', 'EPROTO'
])

/** Reads a PEM file, or refuses naming the flag it came from. */
function readPem (path: string, field: string, what: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    throw createError(ErrorCodes.INVALID_ARGUMENT, `cannot read the ${what} ${path} (--${field}): ${e.code ?? e.message}`, { field, path, cause: e.code })
  }
  if (!text.includes('-----BEGIN ')) throw createError(ErrorCodes.INVALID_ARGUMENT, `the ${what} ${path} (--${field}) holds no PEM block`, { field, path })
  return text
}

/**
 * A CA's PEM text: given as PEM, or read from the path given.
 * @param field the option's name in errors (`ca`)
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `field` when the file cannot be read or holds no PEM
 */
export function loadCa (ca: CaInput, field = 'ca'): string {
  const text = typeof ca === 'string' ? ca : ca.toString('utf8')
  return text.includes('-----BEGIN ') ? text : readPem(text, field, 'CA certificate')
}

/**
 * The certificate and key of `warren up --tls-cert F --tls-key F`, read and checked to belong
 * together (a TLS context is made from them), so a mistake stops the start with its reason.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `tls-cert` or `tls-key`
 */
export function loadServerTls (certPath: string, keyPath: string): TlsServerConfig {
  const cert = readPem(certPath, 'tls-cert', 'certificate')
  const key = readPem(keyPath, 'tls-key', 'key')
  try {
    createSecureContext({ cert, key })
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    const mismatch = /key values mismatch/i.test(e.message)
    const field = mismatch || /key/i.test(e.message) ? 'tls-key' : 'tls-cert'
    throw createError(ErrorCodes.INVALID_ARGUMENT, mismatch
      ? `the key ${keyPath} does not belong to the certificate ${certPath}`
      : `cannot use the certificate ${certPath} with the key ${keyPath}: ${e.message}`, { field, cause: e.code })
  }
  return { cert, key }
}

/** The socket error's code, where Node or undici hid it (`cause`, `cause.cause`). */
function errorCode (err: unknown): string | undefined {
  for (let e = err as { code?: unknown, cause?: unknown } | undefined, i = 0; e !== undefined && e !== null && i < 4; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && e.code !== 'UND_ERR_SOCKET') return e.code
  }
  return undefined
}

/**
 * The public error for a connection TLS refused, or undefined when `err` is something else.
 * @param url what was dialed (named in the message)
 */
export function tlsRefusal (err: unknown, url: string): WarrenError | undefined {
  const code = errorCode(err)
  if (code === undefined || !VERIFY_CODES.has(code)) return undefined
  const why = code === 'ERR_TLS_CERT_ALTNAME_INVALID' || code === 'HOSTNAME_MISMATCH'
    ? 'its certificate does not name this host'
    : code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'EPROTO'
      ? 'it does not speak TLS there (use ws:// or http:// for a plain port)'
      : 'its certificate is not trusted (pass the CA that signed it: --ca FILE, WARREN_CA, or the SDK\'s `ca`)'
  return createError(ErrorCodes.CONNECTION_CLOSED, `TLS refused the connection to ${url}: ${why} [${code}]`, { reason: 'tls', cause: code, url })
}

/** What a plain client reaching a TLS port is told (over plain HTTP), and how a client recognises it. */
export const TLS_REQUIRED_HEADER = 'x-warren-tls-required'

/** The refusal of a plain ws:// or http:// client at a port that serves TLS only. */
export function plainAtTlsPort (url: string): WarrenError {
  return createError(ErrorCodes.CONNECTION_CLOSED, `the control plane at ${url} serves TLS only: use ${url.replace(/^ws:/, 'wss:').replace(/^http:/, 'https:')} (and --ca FILE when its certificate is your own)`, { reason: 'tls', cause: 'TLS_REQUIRED', url })
}

/** A `fetch` that trusts `ca` beside the system's roots (the global fetch when there is none). */
export function fetchTrusting (ca: string | undefined): typeof fetch {
  if (ca === undefined) return fetch
  // undici's own fetch with its own agent: the global fetch cannot be given a CA on Node 20.
  // Loaded at the first request, so a process that never fetches over TLS never loads it.
  let ready: Promise<{ call: typeof import('undici').fetch, dispatcher: import('undici').Agent }> | undefined
  return (async (input: string | URL, init?: RequestInit) => {
    ready ??= import('undici').then((u) => ({ call: u.fetch, dispatcher: new u.Agent({ connect: { ca: trustList(ca) } }) }))
    const { call, dispatcher } = await ready
    return await call(input, { ...(init as object), dispatcher } as Parameters<typeof call>[1])
  }) as unknown as typeof fetch
}

/** The TCP socket under a server-side TLS socket (the socket itself when there is no TLS). */
export function rawSocket (socket: Socket): Socket {
  // Node keeps it as `_parent` (null on a plain socket): the only handle on it a server is given.
  return (socket as Socket & { _parent?: Socket | null })._parent ?? socket
}

/**
 * The one port's HTTP server: plain, or HTTPS with `tls`. A plain HTTP request (a `ws://` or
 * `http://` client) at the HTTPS port is answered in plain HTTP with 400 and
 * {@link TLS_REQUIRED_HEADER}, so the client says what is wrong instead of retrying a reset.
 */
export function createPortServer (tls: TlsServerConfig | undefined, listener: RequestListener): Server {
  if (tls === undefined) return createHttpServer(listener)
  const server = createHttpsServer({ cert: tls.cert, key: tls.key }, listener)
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const raw = rawSocket(socket)
    if (err.code !== 'ERR_SSL_HTTP_REQUEST' || raw === socket || raw.destroyed) { socket.destroy(); return }
    const body = 'this port serves TLS only: use wss:// or https://\n'
    raw.end(`HTTP/1.1 400 Bad Request\r\n${TLS_REQUIRED_HEADER}: 1\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\n\r\n${body}`)
  })
  // https.Server is an http.Server to every caller here (ws, the blob routes).
  return server as unknown as Server
}

/** Whether `server` serves TLS (made by {@link createPortServer} with a certificate). */
export function servesTls (server: Server): boolean {
  return 'setSecureContext' in server
}
