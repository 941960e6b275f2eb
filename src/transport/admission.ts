/**
 * Connections that have not authenticated yet. Each TCP connection to a link server counts from
 * its accept until its handshake completes — or, on a shared HTTP server, until it turns out to
 * be a plain HTTP request, which that server's own timeouts govern — so a connection that never
 * finishes its upgrade request counts as much as an idle WebSocket:
 *
 * - at most `perAddress` wait from one source address, and `max` in all. Past either bound the
 *   OLDEST waiting connection (of that address, or overall) is dropped, never the newcomer: a
 *   crowd of idle sockets cannot keep a real client out, since a client that authenticates
 *   promptly is through long before it becomes the oldest;
 * - each gets `timeoutMs` from its accept to authenticate, then it is dropped.
 */
import type { Socket } from 'node:net'

/** Why a waiting connection is being dropped. */
export type DropReason = 'timeout' | 'crowded'

export interface AdmissionOptions {
  /** Connections waiting at once, from everywhere. */
  max: number
  /** Connections waiting at once from one source address. */
  perAddress: number
  /** Time from accept to a completed handshake. */
  timeoutMs: number
  /** Ends a connection the bounds or the deadline refuse; the admission has stopped counting it already. */
  drop: (socket: Socket, why: DropReason) => void
}

export interface Admission {
  /** A new connection: counted, its deadline armed, and the oldest dropped where a bound is passed. */
  admit (socket: Socket): void
  /** The connection authenticated (or is plain HTTP): no longer counted. Idempotent. */
  settle (socket: Socket): void
  /** True while the connection is counted. */
  has (socket: Socket): boolean
  /** Connections waiting now. */
  readonly waiting: number
  /** Stops every deadline (the server is closing; its sockets go with it). */
  clear (): void
}

/** The key a source address is bounded by: IPv4-mapped IPv6 is the IPv4 address it maps. */
export function addressKey (socket: Socket): string {
  const a = socket.remoteAddress ?? 'unknown'
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a
}

/**
 * Creates the bookkeeping for one server's waiting connections.
 * @param o the bounds, the deadline and how to drop a connection
 */
export function createAdmission (o: AdmissionOptions): Admission {
  // Maps and Sets iterate in insertion order: the first entry is always the oldest.
  const all = new Map<Socket, { key: string, timer: NodeJS.Timeout }>()
  const byAddress = new Map<string, Set<Socket>>()

  const settle = (socket: Socket): void => {
    const w = all.get(socket)
    if (w === undefined) return
    clearTimeout(w.timer)
    all.delete(socket)
    const same = byAddress.get(w.key)
    same?.delete(socket)
    if (same?.size === 0) byAddress.delete(w.key)
  }
  const evict = (socket: Socket, why: DropReason): void => {
    settle(socket)
    o.drop(socket, why)
  }

  return {
    admit (socket) {
      // Refused already (socket-bounds.ts): it must not crowd out a waiting one.
      if (all.has(socket) || socket.destroyed) return
      const key = addressKey(socket)
      let same = byAddress.get(key)
      if (same === undefined) { same = new Set(); byAddress.set(key, same) }
      if (same.size >= o.perAddress) evict(same.values().next().value!, 'crowded')
      if (all.size >= o.max) evict(all.keys().next().value!, 'crowded')
      const timer = setTimeout(() => evict(socket, 'timeout'), o.timeoutMs)
      all.set(socket, { key, timer })
      // The set may have been emptied (and forgotten) by the evictions above.
      if (!byAddress.has(key)) byAddress.set(key, same)
      same.add(socket)
      socket.once('close', () => settle(socket))
    },
    settle,
    has: (socket) => all.has(socket),
    get waiting () { return all.size },
    clear () {
      for (const w of all.values()) clearTimeout(w.timer)
      all.clear()
      byAddress.clear()
    }
  }
}
