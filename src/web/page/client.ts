/**
 * The page's connection to the control plane: the same WebSocket and msgpack frames as the SDK
 * (docs/protocol.md), spoken from the browser. `auth` first with the key the user pasted, then
 * requests to `session` with ids, pongs to pings, and `sandbox-state` notices told to `client`.
 */
import { Packr, Unpackr } from 'msgpackr'

export const ClientDefaults = {
  /** How long the handshake may take. */
  authTimeoutMs: 5000,
  /** How long one request may take. */
  requestTimeoutMs: 30_000,
  /** Requests in flight at once (the server allows 4,096 a link; the page needs a handful). */
  maxInFlight: 64,
  /** Send a ping after this long without hearing from the server (the server's is 5 s). */
  pingAfterMs: 5000
}

/** An error as the server sent it: `{code, message, details}`. */
export class WarrenError extends Error {
  constructor (readonly code: string, message: string, readonly details?: Record<string, unknown>) { super(message) }
}

export type Notice = { type: 'sandbox-state', id: string, state: string, reason?: string, message?: string }

interface Pending { resolve: (v: unknown) => void, reject: (e: Error) => void, timer: number }

/** Plain maps only, as the protocol asks: no records, no extensions. */
const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true })

export class Connection {
  private nextId = 1
  private readonly pending = new Map<number, Pending>()
  private pingTimer = 0
  private closedWith: Error | undefined
  onNotice: (n: Notice) => void = () => {}
  onClose: (why: Error) => void = () => {}

  private constructor (private readonly ws: WebSocket) {}

  /**
   * Opens a socket to this page's origin and logs in.
   * @throws WarrenError WARREN_ERR_UNAUTHENTICATED for a key the server refused
   */
  static async open (token: string, url = defaultUrl()): Promise<Connection> {
    const ws = new WebSocket(url)
    ws.binaryType = 'arraybuffer'
    const c = new Connection(ws)
    await new Promise<void>((resolve, reject) => {
      const timer = window.setTimeout(() => { reject(new WarrenError('WARREN_ERR_TIMEOUT', 'the control plane did not answer the login')); ws.close() }, ClientDefaults.authTimeoutMs)
      const fail = (e: Error): void => { window.clearTimeout(timer); reject(e) }
      ws.onopen = () => { ws.send(packr.pack({ k: 'auth', token, v: 1 })) }
      ws.onerror = () => fail(new WarrenError('WARREN_ERR_CONNECTION_CLOSED', `cannot reach ${url}`))
      ws.onclose = (ev) => fail(ev.code === 4401
        ? new WarrenError('WARREN_ERR_UNAUTHENTICATED', 'the key was refused')
        : new WarrenError('WARREN_ERR_CONNECTION_CLOSED', `the connection closed (${ev.code})`))
      ws.onmessage = (ev) => {
        for (const f of decode(ev.data)) {
          if (f.k === 'welcome') { window.clearTimeout(timer); c.attach(); resolve(); return }
          if (f.k === 'error') {
            const err = f.err as { code?: string, message?: string } | undefined
            fail(new WarrenError(err?.code ?? 'WARREN_ERR_UNAUTHENTICATED', err?.message ?? 'the key was refused'))
            return
          }
        }
      }
    })
    return c
  }

  /**
   * Sends one session request.
   * @returns its reply
   * @throws WarrenError the server's refusal, or WARREN_ERR_CONNECTION_CLOSED
   */
  request<T = unknown> (m: Record<string, unknown>, timeoutMs = ClientDefaults.requestTimeoutMs): Promise<T> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith)
    if (this.pending.size >= ClientDefaults.maxInFlight) return Promise.reject(new WarrenError('WARREN_ERR_OVERLOADED', 'too many requests in flight'))
    const id = this.nextId++
    return new Promise<T>((resolve, reject) => {
      const timer = window.setTimeout(() => { this.pending.delete(id); reject(new WarrenError('WARREN_ERR_TIMEOUT', `${String(m.type)} timed out`)) }, timeoutMs + 1000)
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer })
      this.ws.send(packr.pack({ k: 'request', id, to: 'session', m, t: timeoutMs }))
    })
  }

  close (): void { this.ws.close(1000) }

  private attach (): void {
    this.ws.onmessage = (ev) => { this.heard(); for (const f of decode(ev.data)) this.frame(f) }
    this.ws.onclose = (ev) => this.closed(new WarrenError('WARREN_ERR_CONNECTION_CLOSED', `the connection closed (${ev.code})`))
    this.ws.onerror = null
    this.heard()
  }

  private frame (f: Record<string, unknown>): void {
    switch (f.k) {
      case 'reply':
      case 'error': {
        const p = this.pending.get(f.id as number)
        if (p === undefined) return
        this.pending.delete(f.id as number)
        window.clearTimeout(p.timer)
        if (f.k === 'reply') p.resolve(f.m)
        else {
          const err = f.err as { code: string, message: string, details?: Record<string, unknown> }
          p.reject(new WarrenError(err.code, err.message, err.details))
        }
        return
      }
      case 'tell':
        if (f.to === 'client') this.onNotice(f.m as Notice)
        return
      case 'ping':
        this.ws.send(packr.pack({ k: 'pong' }))
        return
      case 'bye':
        this.ws.close(1000)
    }
  }

  /** Pings when the server has been quiet, so a dead link is found by both sides. */
  private heard (): void {
    window.clearTimeout(this.pingTimer)
    this.pingTimer = window.setTimeout(() => {
      if (this.ws.readyState === WebSocket.OPEN) this.ws.send(packr.pack({ k: 'ping' }))
    }, ClientDefaults.pingAfterMs)
  }

  private closed (why: Error): void {
    if (this.closedWith !== undefined) return
    this.closedWith = why
    window.clearTimeout(this.pingTimer)
    for (const p of this.pending.values()) { window.clearTimeout(p.timer); p.reject(why) }
    this.pending.clear()
    this.onClose(why)
  }
}

/** The WebSocket URL of the control plane that served this page (same host and port). */
function defaultUrl (): string {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/`
}

/** One WebSocket message: one or more msgpack values back to back. */
function decode (data: unknown): Array<Record<string, unknown>> {
  if (!(data instanceof ArrayBuffer)) return []
  try {
    return unpackr.unpackMultiple(new Uint8Array(data)) as Array<Record<string, unknown>>
  } catch {
    return []
  }
}
