/**
 * Helpers for the transport tests: real servers and clients on loopback, and a raw WebSocket
 * peer that speaks the frame codec by hand (to misbehave in ways our own client never would).
 * Everything started is registered with the test's `defer`.
 */
import { once as eventOnce, type EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import { WebSocket } from 'ws'
import type { Cleanup } from '../support/index.js'
import { waitFor } from '../support/index.js'
import {
  createCodec, createLinkClient, createLinkServer,
  type Frame, type Link, type LinkClient, type LinkEvents, type LinkClientOptions, type LinkServer, type LinkServerOptions
} from '../../src/transport/index.js'

export const TOKEN = 'test-token'
export const PRINCIPAL = { tenant: 't1', scopes: ['all'] }
export const codec = createCodec(64 * 1024 * 1024)

type Defer = Cleanup['defer']

/** A listening link server on 127.0.0.1 that accepts TOKEN. */
export async function startServer (defer: Defer, options: Partial<LinkServerOptions> = {}): Promise<LinkServer> {
  const server = createLinkServer({ authenticate: (t) => t === TOKEN ? PRINCIPAL : null, host: '127.0.0.1', ...options })
  await server.listen()
  defer(() => server.close())
  return server
}

/** A connected client link with fast reconnects. */
export async function connect (defer: Defer, server: LinkServer, options: Partial<LinkClientOptions> = {}): Promise<LinkClient> {
  const client = createLinkClient({ url: server.url, token: TOKEN, reconnect: { minDelayMs: 5, maxDelayMs: 50 }, ...options })
  defer(() => client.close())
  await client.connect()
  return client
}

/** The server-side link of the only session (waits for it). */
export async function onlyLink (server: LinkServer): Promise<Link> {
  return await waitFor(() => server.links.size === 1 ? [...server.links][0] : undefined, 5000, 'the server session')
}

/** Destroys the TCP socket under a link's WebSocket: no close frame, the peer sees a dead connection. */
export function killTcp (link: Link): void {
  const ws = link.socket
  if (ws === null) throw new Error('link has no socket')
  // ws keeps the net.Socket in a private field; reaching it is the point of this helper.
  ;(ws as unknown as { _socket: Socket })._socket.destroy()
}

/** A raw WebSocket peer: every frame it receives is decoded and kept. */
export interface RawPeer {
  ws: WebSocket
  frames: Array<Record<string, unknown>>
  messages: number
  closed: Promise<number>
  /** The close frame's reason, once closed. */
  closeReason: () => string
  isClosed: () => boolean
  send (frame: Frame | Record<string, unknown>): void
  sendBytes (bytes: Uint8Array | string, binary?: boolean): void
  /** Resolves with the first received frame (from index `from`) matching `pred`. */
  frame (pred: (f: Record<string, unknown>) => boolean, from?: number, ms?: number): Promise<Record<string, unknown>>
}

export async function rawPeer (defer: Defer, url: string): Promise<RawPeer> {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  defer(() => ws.terminate())
  ws.on('error', () => {})
  let closedFlag = false
  let reason = ''
  const closed = new Promise<number>((resolve) => ws.on('close', (code, why) => { closedFlag = true; reason = why.toString(); resolve(code) }))
  const peer: RawPeer = {
    ws,
    frames: [],
    messages: 0,
    closed,
    closeReason: () => reason,
    isClosed: () => closedFlag,
    send (frame) { ws.send(codec.encode(frame as Frame)) },
    sendBytes (bytes, binary = true) { ws.send(bytes, { binary }) },
    async frame (pred, from = 0, ms = 5000) {
      return await waitFor(() => peer.frames.slice(from).find(pred), ms, 'a matching frame')
    }
  }
  ws.on('message', (data: Buffer) => {
    peer.messages++
    for (const v of codec.decode(data).values) peer.frames.push(v as Record<string, unknown>)
  })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('close', () => reject(new Error('raw peer could not connect')))
  })
  return peer
}

/** A raw peer that has completed the auth handshake. */
export async function rawAuthed (defer: Defer, url: string): Promise<RawPeer> {
  const peer = await rawPeer(defer, url)
  peer.send({ k: 'auth', token: TOKEN })
  await peer.frame((f) => f.k === 'welcome')
  return peer
}

/** Resolves with the arguments of the next `event` of a link. */
export function once<K extends keyof LinkEvents> (link: Link, event: K): Promise<LinkEvents[K]> {
  return eventOnce(link as unknown as EventEmitter, event) as Promise<LinkEvents[K]>
}

/** Rejection of `p`, or a failure when it resolves. */
export async function rejection (p: Promise<unknown>): Promise<{ code?: string, message: string, details?: Record<string, unknown> }> {
  try {
    await p
  } catch (err) {
    return err as { code?: string, message: string }
  }
  throw new Error('expected a rejection')
}
