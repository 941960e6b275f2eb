import type { Socket } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { connect, onlyLink, once, rawAuthed, startServer } from './helpers.js'

test('the server detects a client that never answers pings, and closes the link', timed(5000, async (defer) => {
  const server = await startServer(defer, { heartbeatIntervalMs: 30, heartbeatTimeoutMs: 150, sessionLingerMs: 0 })
  const started = Date.now()
  // A raw peer authenticates and then stays silent: it speaks no pong.
  const peer = await rawAuthed(defer, server.url)
  const link = await onlyLink(server)
  const [reason] = await once(link, 'detach')
  assert.is(reason.code, ErrorCodes.PEER_UNRESPONSIVE)
  assert.ok(Date.now() - started >= 150, 'declared dead before the timeout')
  // The server pinged before giving up, and terminated the socket (no close handshake with a dead peer).
  assert.ok(peer.frames.some((f) => f.k === 'ping'))
  assert.is(await peer.closed, 1006)
  await new Promise((r) => setImmediate(r))
  assert.is(link.state, 'closed')
  assert.is(server.links.size, 0)
}))

test('the client detects a server whose socket stopped reading, and reconnects into the same session', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (_to, m) => m } })
  const client = await connect(defer, server, { heartbeatIntervalMs: 30, heartbeatTimeoutMs: 150 })
  const serverLink = await onlyLink(server)
  const detached = once(client, 'detach')
  // A paused socket: the server process is alive but reads nothing, so our pings go unanswered.
  ;(serverLink.socket as unknown as { _socket: Socket })._socket.pause()
  const [reason] = await detached
  assert.is(reason.code, ErrorCodes.PEER_UNRESPONSIVE)
  const [info] = await once(client, 'open')
  assert.ok(info.resumed)
  assert.is(server.links.size, 1)
  assert.is(await client.request('sys/echo', 'after'), 'after')
}))

test('a peer that answers pings stays connected while idle', timed(8000, async (defer) => {
  const server = await startServer(defer, { heartbeatIntervalMs: 20, heartbeatTimeoutMs: 1000 })
  const client = await connect(defer, server, { heartbeatIntervalMs: 20, heartbeatTimeoutMs: 1000 })
  let detaches = 0
  client.on('detach', () => detaches++)
  const serverLink = await onlyLink(server)
  serverLink.on('detach', () => detaches++)
  let pings = 0
  serverLink.socket!.on('message', () => pings++)
  // Idle for well over the timeout: only pings and pongs cross, and they keep the link alive.
  await new Promise((r) => setTimeout(r, 2500))
  assert.is(detaches, 0)
  assert.ok(pings > 5, `only ${pings} messages in 2.5 s of idling`)
  assert.is(client.state, 'open')
}))

test.run()
