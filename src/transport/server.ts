/**
 * The accepting side: a WebSocket server whose sockets must authenticate before anything else.
 *
 * Handshake: the first frame of a socket must be `auth {token, session?}`. The server calls the
 * pluggable `authenticate(token)`; until it answers, any other frame is refused with
 * WARREN_ERR_UNAUTHENTICATED and the socket closed, so nothing is acted on for an unknown peer.
 * A known `session` id (server-issued, unguessable) resumes that session; an unknown one starts
 * a new session. The answer is `welcome {session, resumed, streams}`.
 *
 * Until then a connection is one of a bounded few (admission.ts): bounded per source address
 * and in total, the oldest dropped first, each given `authTimeoutMs` from its TCP accept.
 *
 * A session whose socket drops waits `sessionLingerMs` for its client to come back.
 */
import { EventEmitter } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { nanoid } from 'nanoid'
import { WebSocket, WebSocketServer } from 'ws'
import { createError, ErrorCodes, toWireError, type WarrenError } from '../errors.js'
import { createAdmission, type Admission, type DropReason } from './admission.js'
import { boundSockets } from './socket-bounds.js'
import { createCodec, type Codec } from './codec.js'
import { resolveLinkOptions, type LinkOptions, type LinkOptionsInput } from './defaults.js'
import { FrameProblem, parseFrame, PROTOCOL_VERSION } from './frames.js'
import { LinkCore, type Link, type LinkHandler } from './link.js'
import { rawSocket, servesTls } from './tls.js'

/** Close code sent with a refused handshake (4000-4999 are for applications). */
export const CLOSE_UNAUTHENTICATED = 4401
/** The standard close code for a server too busy to take the connection now. */
export const CLOSE_TRY_AGAIN = 1013
/** Close code after refusing a client's protocol version (4000–4999: application codes). */
export const CLOSE_PROTOCOL_VERSION = 4426

/** The close frame's reason of a refused login, by its error's code (the rest: too many sockets waiting to log in). */
const CLOSE_REASONS: Partial<Record<string, string>> = {
  [ErrorCodes.UNAUTHENTICATED]: 'unauthenticated',
  [ErrorCodes.PROTOCOL_VERSION]: 'unsupported protocol version'
}

export interface LinkServerOptions extends LinkOptionsInput {
  /**
   * Checks a token. Returns the principal (any value but null/undefined) to accept, null or
   * undefined to refuse; a throw also refuses.
   */
  authenticate: (token: string) => unknown
  /** Handler for every session, or a function choosing one per session. */
  handler?: LinkHandler | ((link: Link) => LinkHandler | undefined)
  /** Port to listen on; 0 (default) picks a free one. Ignored with `server`. */
  port?: number
  /** Interface to listen on; default all. Ignored with `server`. */
  host?: string
  /** Share an existing HTTP server instead of listening. */
  server?: Server
  /** Only accept WebSocket upgrades on this path. */
  path?: string
}

export interface LinkServerEvents {
  /** A new session was authenticated (emitted before its 'open', so listeners see that too). */
  link: [link: Link]
  /** A handshake was refused. */
  refused: [reason: WarrenError]
  /** A new socket was refused: its address had `maxSocketsPerAddress` open, or the server `maxSockets`. */
  socketRefused: [address: string, why: 'address' | 'total']
}

export interface LinkServer extends EventEmitter<LinkServerEvents> {
  /** The port listened on (after `listen`). */
  readonly port: number
  /** `ws://host:port/path` of this server (after `listen`). */
  readonly url: string
  /** Live sessions (open or waiting for a resume). */
  readonly links: ReadonlySet<Link>
  /**
   * Starts listening.
   * @returns the port
   */
  listen (): Promise<number>
  /** Ends every session (without `bye`, so clients may come back to a restarted server) and stops listening. */
  close (): Promise<void>
}

function samePrincipal (a: unknown, b: unknown): boolean {
  if (a === b) return true
  try { return JSON.stringify(a) === JSON.stringify(b) } catch { return false }
}

class Server_ extends EventEmitter<LinkServerEvents> implements LinkServer {
  private readonly o: LinkOptions
  private readonly codec: Codec
  private readonly http: Server
  private readonly ownsHttp: boolean
  private readonly wss: WebSocketServer
  private readonly sessions = new Map<string, LinkCore>()
  private readonly lingering = new Map<LinkCore, NodeJS.Timeout>()
  private readonly live = new Set<Link>()
  private readonly admission: Admission
  /** Upgraded sockets still waiting to authenticate, and how each is refused. */
  private readonly handshakes = new Map<Socket, (err: WarrenError, closeCode: number) => void>()

  constructor (private readonly options: LinkServerOptions) {
    super()
    this.o = resolveLinkOptions(options)
    this.codec = createCodec(this.o.maxFrameBytes)
    this.ownsHttp = options.server === undefined
    this.http = options.server ?? createServer((_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain' })
      res.end('warren link: WebSocket only\n')
    })
    this.wss = new WebSocketServer({
      server: this.http,
      path: options.path,
      maxPayload: this.o.maxMessageBytes,
      perMessageDeflate: false
    })
    this.admission = createAdmission({
      max: this.o.maxUnauthenticated,
      perAddress: this.o.maxUnauthenticatedPerAddress,
      timeoutMs: this.o.authTimeoutMs,
      drop: (socket, why) => this.drop(socket, why)
    })
    // Every socket, first: one refused here is never admitted.
    boundSockets(this.http, {
      perAddress: this.o.maxSocketsPerAddress,
      max: this.o.maxSockets,
      httpIdleMs: this.o.httpIdleMs,
      onRefused: (address, why) => this.emit('socketRefused', address, why)
    })
    // Counted from the TCP accept, so a connection that never finishes its upgrade (or its TLS
    // handshake) is bounded too. Keyed by the TCP socket: under TLS, requests come on the TLS one.
    this.http.on('connection', (socket: Socket) => this.admission.admit(socket))
    // A plain HTTP request on a shared server is that server's business (and its timeouts').
    this.http.on('request', (req) => this.admission.settle(rawSocket(req.socket)))
    this.wss.on('connection', (ws, req) => this.onConnection(ws, req.socket))
    // Errors of the listening socket surface through listen(); nothing here may throw unhandled.
    this.wss.on('error', () => {})
  }

  get port (): number {
    const a = this.http.address()
    return a !== null && typeof a === 'object' ? (a as AddressInfo).port : 0
  }

  get url (): string {
    const a = this.http.address() as AddressInfo | null
    const host = a === null || a.address === '::' || a.address === '0.0.0.0' ? '127.0.0.1' : a.family === 'IPv6' ? `[${a.address}]` : a.address
    return `${servesTls(this.http) ? 'wss' : 'ws'}://${host}:${this.port}${this.options.path ?? ''}`
  }

  get links (): ReadonlySet<Link> { return this.live }

  listen (): Promise<number> {
    if (!this.ownsHttp || this.http.listening) return Promise.resolve(this.port)
    return new Promise((resolve, reject) => {
      this.http.once('error', reject)
      this.http.listen(this.options.port ?? 0, this.options.host, () => {
        this.http.off('error', reject)
        resolve(this.port)
      })
    })
  }

  async close (): Promise<void> {
    const reason = createError(ErrorCodes.CONNECTION_CLOSED, 'the server is shutting down')
    for (const link of [...this.sessions.values()]) link.shutdown(reason, false)
    for (const ws of this.wss.clients) ws.terminate()
    this.admission.clear()
    await new Promise<void>((resolve) => this.wss.close(() => resolve()))
    if (this.ownsHttp && this.http.listening) {
      await new Promise<void>((resolve) => this.http.close(() => resolve()))
    }
  }

  /** Ends a waiting connection the admission refused: with an error frame when it speaks WebSocket. */
  private drop (socket: Socket, why: DropReason): void {
    const err = why === 'timeout'
      ? createError(ErrorCodes.UNAUTHENTICATED, `no authentication within ${this.o.authTimeoutMs} ms`)
      : createError(ErrorCodes.OVERLOADED, 'too many connections are waiting to authenticate; this one waited longest', { retryAfterMs: 100 })
    const refuse = this.handshakes.get(socket)
    if (refuse !== undefined) refuse(err, why === 'timeout' ? CLOSE_UNAUTHENTICATED : CLOSE_TRY_AGAIN)
    else socket.destroy()
  }

  private onConnection (ws: WebSocket, socket: Socket): void {
    // ws emits 'error' before 'close' on protocol errors; without a listener that would crash the process.
    ws.on('error', () => {})
    // The admission and the refusals know the TCP socket; this one may be the TLS socket over it.
    const tcp = rawSocket(socket)
    // A keep-alive connection that served plain HTTP first is waiting again now.
    this.admission.admit(tcp)
    let authenticating = false
    let refused = false
    const refuse = (err: WarrenError, closeCode: number): void => {
      if (refused) return
      refused = true
      this.handshakes.delete(tcp)
      ws.off('message', onMessage)
      if (err.code === ErrorCodes.UNAUTHENTICATED) this.emit('refused', err)
      if (ws.readyState !== WebSocket.OPEN) { socket.destroy(); return }
      try { ws.send(this.codec.encode({ k: 'error', err: toWireError(err) })) } catch { /* cannot fail for this small frame */ }
      ws.close(closeCode, CLOSE_REASONS[err.code] ?? 'too many unauthenticated connections')
      // Not waiting for the peer's close: a peer that never answers would hold the socket.
      socket.destroySoon()
    }
    const unauthenticated = (message: string): void => refuse(createError(ErrorCodes.UNAUTHENTICATED, message), CLOSE_UNAUTHENTICATED)
    this.handshakes.set(tcp, refuse)
    ws.once('close', () => { this.handshakes.delete(tcp); this.admission.settle(tcp) })
    const onMessage = (data: Buffer, isBinary: boolean): void => {
      if (authenticating) return unauthenticated('frame before authentication completed')
      let frame
      try {
        const { values } = isBinary ? this.codec.decode(data) : { values: [] }
        frame = values.length === 1 ? parseFrame(values[0]) : undefined
      } catch {
        frame = undefined
      }
      if (frame === undefined || frame instanceof FrameProblem || frame.k !== 'auth') {
        return unauthenticated('the first frame must be a single auth frame')
      }
      if (data.length > this.o.maxFrameBytes) return unauthenticated('auth frame too large')
      if ((frame.v ?? 1) !== PROTOCOL_VERSION) {
        return refuse(createError(ErrorCodes.PROTOCOL_VERSION, `this server speaks protocol version ${PROTOCOL_VERSION}; the client asked for ${frame.v ?? 1}`, {
          field: 'v', supported: [PROTOCOL_VERSION]
        }), CLOSE_PROTOCOL_VERSION)
      }
      authenticating = true
      const { token, session } = frame
      Promise.resolve()
        .then(() => this.options.authenticate(token))
        .then(
          (principal) => {
            if (refused || ws.readyState !== WebSocket.OPEN) return
            if (principal === null || principal === undefined) return unauthenticated('token refused')
            this.handshakes.delete(tcp)
            this.admission.settle(tcp)
            ws.off('message', onMessage)
            this.admit(ws, principal, session)
          },
          () => unauthenticated('token refused')
        )
    }
    ws.on('message', onMessage)
  }

  private admit (ws: WebSocket, principal: unknown, session: string | undefined): void {
    const existing = session === undefined ? undefined : this.sessions.get(session)
    // A session resumes only for the principal that opened it: a valid token of someone else
    // holding a leaked session id gets a session of its own, never that one.
    if (existing !== undefined && existing.state !== 'closed' && samePrincipal(existing.principal, principal)) {
      const t = this.lingering.get(existing)
      if (t !== undefined) clearTimeout(t)
      this.lingering.delete(existing)
      ws.send(this.codec.encode({ k: 'welcome', session: existing.sessionId, resumed: true, streams: existing.positions(), v: PROTOCOL_VERSION }))
      existing.attach(ws, true, true)
      return
    }
    const link: LinkCore = new LinkCore(this.o, this.codec, {
      detached: () => this.onDetached(link),
      closed: () => this.onClosed(link)
    }, { sessionId: nanoid(), principal, handler: undefined })
    const h = this.options.handler
    link.setHandler(typeof h === 'function' ? h(link) : h)
    this.sessions.set(link.sessionId, link)
    this.live.add(link)
    ws.send(this.codec.encode({ k: 'welcome', session: link.sessionId, resumed: false, streams: [], v: PROTOCOL_VERSION }))
    this.emit('link', link)
    link.attach(ws, false, false)
  }

  private onDetached (link: LinkCore): void {
    const reason = createError(ErrorCodes.CONNECTION_CLOSED, `session not resumed within ${this.o.sessionLingerMs} ms`)
    if (this.o.sessionLingerMs <= 0) {
      link.shutdown(reason, false)
      return
    }
    this.lingering.set(link, setTimeout(() => link.shutdown(reason, false), this.o.sessionLingerMs))
  }

  private onClosed (link: LinkCore): void {
    const t = this.lingering.get(link)
    if (t !== undefined) clearTimeout(t)
    this.lingering.delete(link)
    this.sessions.delete(link.sessionId)
    this.live.delete(link)
  }
}

/**
 * Creates a link server (call `listen()` to start accepting).
 * @param options `authenticate`, the handler, where to listen, and any link option
 * @throws WARREN_ERR_INVALID_ARGUMENT on inconsistent options
 */
export function createLinkServer (options: LinkServerOptions): LinkServer {
  return new Server_(options)
}
