/**
 * Every TCP connection a server holds, whatever it became: a WebSocket link (authenticated or
 * not), a plain HTTP request (the page, /metrics, a blob read), or a TLS handshake that never
 * ended. The admission (admission.ts) bounds only the connections still waiting to authenticate;
 * once a socket has sent a plain HTTP request or authenticated, it is bounded here:
 *
 * - at most `perAddress` open from one source address and `max` in all. Past either bound the
 *   NEWCOMER is refused (destroyed at once): the sockets already open are working sessions, and
 *   an address that crowds itself out keeps only itself out;
 * - a plain HTTP response that makes no progress for `httpIdleMs` (a reader that stopped
 *   reading, a request body that stopped coming) is ended, so a slow reader cannot hold a socket
 *   and its buffered response for ever. WebSocket links have their own heartbeats.
 */
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { addressKey } from './admission.js'

export interface SocketBoundsOptions {
  /** Sockets open at once from one source address. */
  perAddress: number
  /** Sockets open at once in all. */
  max: number
  /** A plain HTTP exchange idle this long (nothing read or written) is ended. */
  httpIdleMs: number
  /** Told of each refused newcomer (for a log line or a counter). */
  onRefused?: (address: string, why: 'address' | 'total') => void
}

/**
 * Bounds the sockets `server` accepts (call before it listens).
 * @param server the HTTP(S) server; for HTTPS, `connection` is the raw TCP socket, so a TLS handshake counts from its first byte
 */
export function boundSockets (server: Server, o: SocketBoundsOptions): void {
  const byAddress = new Map<string, number>()
  let open = 0
  server.on('connection', (socket: Socket) => {
    const key = addressKey(socket)
    const from = byAddress.get(key) ?? 0
    if (from >= o.perAddress || open >= o.max) {
      socket.destroy()
      o.onRefused?.(key, from >= o.perAddress ? 'address' : 'total')
      return
    }
    byAddress.set(key, from + 1)
    open++
    socket.once('close', () => {
      open--
      const n = (byAddress.get(key) ?? 1) - 1
      if (n === 0) byAddress.delete(key)
      else byAddress.set(key, n)
    })
  })
  // Each plain request arms the idle timer of its socket (for HTTPS, the TLS socket that carries
  // it); Node's keep-alive timeout takes over between requests. Upgraded sockets never get here.
  server.on('request', (req) => {
    const socket = req.socket
    socket.setTimeout(o.httpIdleMs)
    if (!timedOut.has(socket)) {
      timedOut.add(socket)
      socket.on('timeout', () => socket.destroy())
    }
  })
}

/** Sockets that already have the idle listener (a keep-alive socket carries many requests). */
const timedOut = new WeakSet<Socket>()
