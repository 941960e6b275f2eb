/**
 * The host's end of a VM's egress port (the guest's end and the frame format are in
 * container/agent/relay-mux.c): each connection the guest's relay opens becomes a connection to
 * the sandbox's egress proxy (container/egress.ts `startEgressProxy`, the same proxy, allow-list
 * and reports as a container's), bytes both ways within a window per connection and direction.
 *
 * On connecting it sends HELLO and reads nothing until the guest's READY (scanned for, as the
 * guest scans for HELLO), so a session never reads another's frames.
 *
 * Every VM's port is connected, with egress or without (a connection it opens is then closed at
 * once): a guest whose port has no host polls to open it again every 100 ms, which under TCG
 * is most of what an idle VM costs (3.8% of a core instead of 0.9%, measured here).
 *
 * The guest is the tenant's (its root can speak on the port itself): nothing it sends may grow
 * the node. Invariant: while what is queued to the guest is past the socket's high-water mark,
 * the port is not read (the guest's writes block in its own kernel) and nothing more from the
 * proxies is sent, so the queue holds at most one read's worth of answers beyond the mark; and
 * a connection's credit never passes its window.
 */
import { mkdir } from 'node:fs/promises'
import { createConnection, type Socket } from 'node:net'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { startEgressProxy, type EgressAsk, type EgressRouting } from '../container/egress.js'

const HDR = 9
const DATA_MAX = 64 * 1024
const WINDOW = 256 * 1024
const CREDIT_BATCH = 32 * 1024
const MAGIC = Buffer.from('warren-egress-1')
/** The guest's relay opens at most 64 at once; a guest speaking for itself gets no more than this. */
const MAX_CONNS = 256
const K = { open: 1, data: 2, eof: 3, close: 4, credit: 5, hello: 6, ready: 7 } as const

/** One relayed connection, host side. */
interface Conn {
  socket: Socket
  /** Bytes the guest may still be sent. */
  credit: number
  /** Data from the proxy waiting for credit (at most one read's worth: the socket is paused meanwhile). */
  queued: Buffer[]
  /** Bytes written to the proxy not yet credited back. */
  delivered: number
  sentEof: boolean
  gotEof: boolean
  /** The proxy's socket closed: once what it gave is sent, the guest is told CLOSE. */
  closed: boolean
}

/** The host's end of one VM's egress port. */
export interface EgressMux {
  /** Connections relayed now. */
  readonly open: number
  /** Bytes written to the guest's port and not yet taken by it. */
  readonly queuedBytes: number
  /** False while the port is not read, waiting for the guest to take what it was sent. */
  readonly reading: boolean
  /** Where the guest's connections go from now on: a proxy's socket, or nowhere (each is closed). */
  route (proxySocket: string | undefined): void
  /** Resolves when the port's connection ends (the VM ended, or `close`). */
  readonly ended: Promise<void>
  close (): void
}

function frame (id: number, kind: number, payload?: Uint8Array): Buffer {
  const h = Buffer.alloc(HDR)
  h.writeUInt32BE(id >>> 0, 0)
  h[4] = kind
  h.writeUInt32BE(payload?.length ?? 0, 5)
  return payload !== undefined && payload.length > 0 ? Buffer.concat([h, payload]) : h
}

const READY = frame(0, K.ready, MAGIC)

/**
 * Connects to the VM's egress port (`portSocket`, QEMU's chardev) and relays each connection
 * the guest opens to the proxy listening at `proxySocket` (none: each is refused).
 * @throws WARREN_ERR_SANDBOX_GONE when QEMU's socket cannot be reached
 */
export async function startEgressMux (portSocket: string, proxySocket?: string): Promise<EgressMux> {
  let proxy = proxySocket
  const port = createConnection({ path: portSocket })
  await new Promise<void>((resolve, reject) => {
    port.once('connect', resolve)
    port.once('error', (err) => reject(createError(ErrorCodes.SANDBOX_GONE, `cannot reach the VM's egress port at ${portSocket}: ${err.message}`, { path: portSocket })))
  })
  const conns = new Map<number, Conn>()
  let input: Buffer = Buffer.alloc(0)
  let synced = false
  let markEnded!: () => void
  const ended = new Promise<void>((resolve) => { markEnded = resolve })

  const send = (id: number, kind: number, payload?: Uint8Array): void => {
    // Past the mark, the guest is not taking what it is sent: read nothing more from it until it has.
    if (!port.destroyed && !port.write(frame(id, kind, payload))) port.pause()
  }
  const forget = (id: number, tell: boolean): void => {
    const c = conns.get(id)
    if (c === undefined) return
    conns.delete(id)
    c.socket.destroy()
    if (tell) send(id, K.close)
  }
  const creditBack = (id: number, c: Conn, force: boolean): void => {
    if (c.delivered >= CREDIT_BATCH || (force && c.delivered > 0)) {
      const v = Buffer.alloc(4)
      v.writeUInt32BE(c.delivered, 0)
      send(id, K.credit, v)
      c.delivered = 0
    }
  }
  /** Sends what the proxy gave, as far as the guest's window allows. */
  const pump = (id: number, c: Conn): void => {
    // The port's queue comes first: what waits goes on at its drain.
    if (port.writableNeedDrain) return
    while (c.queued.length > 0 && c.credit > 0) {
      const head = c.queued[0]!
      const n = Math.min(head.length, c.credit, DATA_MAX)
      send(id, K.data, head.subarray(0, n))
      c.credit -= n
      if (n === head.length) c.queued.shift()
      else c.queued[0] = head.subarray(n)
    }
    if (c.queued.length > 0) return
    if (c.socket.readableEnded || c.closed) {
      if (!c.sentEof) { send(id, K.eof); c.sentEof = true }
      // Closed for good: nothing the guest still sends can go anywhere. Else it may half-close.
      if (c.closed) forget(id, true)
      else finish(id, c)
      return
    }
    c.socket.resume()
  }

  const open = (id: number): void => {
    if (conns.has(id)) { forget(id, true); return }
    if (proxy === undefined || conns.size >= MAX_CONNS) { send(id, K.close); return } // no egress for this VM, or too many
    const socket = createConnection({ path: proxy })
    const c: Conn = { socket, credit: WINDOW, queued: [], delivered: 0, sentEof: false, gotEof: false, closed: false }
    conns.set(id, c)
    socket.on('data', (chunk: Buffer) => {
      c.queued.push(chunk)
      socket.pause()
      pump(id, c)
    })
    // The proxy's end, or its socket closing, reach the guest after the bytes before them.
    socket.on('end', () => { if (conns.get(id) === c) pump(id, c) })
    socket.on('close', () => { if (conns.get(id) === c) { c.closed = true; pump(id, c) } })
    socket.on('error', () => { c.queued = []; c.closed = true })
  }
  const finish = (id: number, c: Conn): void => { if (c.sentEof && c.gotEof && c.queued.length === 0) forget(id, false) }

  const onFrame = (id: number, kind: number, payload: Buffer): void => {
    if (kind === K.open) { open(id); return }
    const c = conns.get(id)
    if (c === undefined) return
    switch (kind) {
      case K.data:
        // Past EOF, or past the window (what the proxy has not taken yet): not the guest's relay.
        if (c.gotEof || c.socket.writableLength + payload.length > WINDOW) { forget(id, true); return }
        // Written as it comes; credit goes back once the proxy's socket took it.
        c.socket.write(payload, () => { c.delivered += payload.length; creditBack(id, c, c.socket.writableLength === 0) })
        return
      case K.eof:
        c.gotEof = true
        c.socket.end()
        finish(id, c)
        return
      case K.close:
        forget(id, false)
        return
      case K.credit: {
        // Credit gives back what was sent: more than the window is not the guest's relay.
        const n = payload.length === 4 ? payload.readUInt32BE(0) : -1
        if (n < 0 || c.credit + n > WINDOW) { forget(id, true); return }
        c.credit += n
        pump(id, c)
      }
    }
  }

  port.on('data', (chunk: Buffer) => {
    input = input.length === 0 ? chunk : Buffer.concat([input, chunk])
    if (!synced) {
      const at = input.indexOf(READY)
      if (at < 0) { input = input.subarray(Math.max(0, input.length - READY.length)); return }
      input = input.subarray(at + READY.length)
      synced = true
    }
    while (input.length >= HDR) {
      const n = input.readUInt32BE(5)
      if (n > DATA_MAX) { port.destroy(); return } // not the guest's relay speaking
      if (input.length < HDR + n) break
      onFrame(input.readUInt32BE(0), input[4]!, input.subarray(HDR, HDR + n))
      input = input.subarray(HDR + n)
    }
  })
  const end = (): void => {
    for (const id of [...conns.keys()]) forget(id, false)
    markEnded()
  }
  port.on('error', end)
  port.on('close', end)
  port.on('drain', () => {
    port.resume()
    for (const [id, c] of [...conns]) pump(id, c)
  })
  port.write(frame(0, K.hello, MAGIC))

  return {
    get open () { return conns.size },
    get queuedBytes () { return port.writableLength },
    get reading () { return !port.isPaused() },
    route: (to) => {
      proxy = to
      // Connections to a proxy that is going end with it.
      if (to === undefined) for (const id of [...conns.keys()]) forget(id, true)
    },
    ended,
    close: () => { port.destroy() }
  }
}

/** A VM's way out: its proxy (with its allow-list) and the relay from the guest's port to it. */
export interface VmEgress {
  close (): Promise<void>
}

/**
 * Starts the egress proxy of a VM in `<vm dir>/egress/` and routes the guest's port (`mux`) to it.
 * @param onAsk told of every connection the proxy is asked for (the backend's onEgress)
 */
export async function openVmEgress (vm: { dir: string }, mux: EgressMux, allow: readonly string[], routing: EgressRouting, onAsk: (ask: EgressAsk) => void): Promise<VmEgress> {
  const dir = join(vm.dir, 'egress')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const proxy = await startEgressProxy(join(dir, 'proxy.sock'), allow, routing, onAsk)
  mux.route(proxy.socketPath)
  return { close: async () => { mux.route(undefined); await proxy.close() } }
}
