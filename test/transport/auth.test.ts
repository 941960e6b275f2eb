import { connect as netConnect } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { CLOSE_TRY_AGAIN, CLOSE_UNAUTHENTICATED, createLinkClient, PROTOCOL_VERSION, type Link } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { connect, once, PRINCIPAL, rawPeer, rejection, startServer, TOKEN } from './helpers.js'

test('a valid token is accepted: the session carries the principal and serves requests', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (to, m) => ({ to, m }) } })
  const seen: Link[] = []
  server.on('link', (l) => seen.push(l))
  const client = await connect(defer, server)
  assert.is(client.state, 'open')
  assert.is(seen.length, 1)
  assert.equal(seen[0]!.principal, PRINCIPAL)
  assert.is(seen[0]!.sessionId, client.sessionId)
  assert.equal(await client.request('sys/x', 1), { to: 'sys/x', m: 1 })
}))

test('the handshake names the protocol version: welcome carries it, an auth asking for another is refused before the token is looked at', timed(5000, async (defer) => {
  let asked = 0
  const server = await startServer(defer, { authenticate: (t) => { asked++; return t === TOKEN ? PRINCIPAL : null } })
  const ok = await rawPeer(defer, server.url)
  ok.send({ k: 'auth', token: TOKEN, v: PROTOCOL_VERSION })
  const welcome = await ok.frame((f) => f.k === 'welcome')
  assert.is(welcome.v, PROTOCOL_VERSION)
  // A client of before the field (no v) speaks version 1.
  const old = await rawPeer(defer, server.url)
  old.send({ k: 'auth', token: TOKEN })
  assert.is((await old.frame((f) => f.k === 'welcome')).k, 'welcome')
  assert.is(asked, 2)
  const future = await rawPeer(defer, server.url)
  future.send({ k: 'auth', token: TOKEN, v: PROTOCOL_VERSION + 1 })
  const err = (await future.frame((f) => f.k === 'error')).err as { code: string, details: { field: string, supported: number[] } }
  assert.is(err.code, ErrorCodes.PROTOCOL_VERSION)
  assert.equal(err.details.supported, [PROTOCOL_VERSION])
  assert.is(err.details.field, 'v')
  assert.is(await future.closed, 4426)
  assert.is(future.closeReason(), 'unsupported protocol version')
  assert.is(asked, 2)
  const bad = await rawPeer(defer, server.url)
  bad.send({ k: 'auth', token: TOKEN, v: 'one' } as Record<string, unknown>)
  assert.is(((await bad.frame((f) => f.k === 'error')).err as { code: string }).code, ErrorCodes.UNAUTHENTICATED)
}))

test('async authenticate is awaited', timed(5000, async (defer) => {
  const server = await startServer(defer, {
    authenticate: async (t) => { await new Promise((r) => setTimeout(r, 20)); return t === TOKEN ? { who: 'async' } : null }
  })
  await connect(defer, server)
  assert.equal([...server.links][0]!.principal, { who: 'async' })
}))

test('a bad token is refused with UNAUTHENTICATED and the client does not retry', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const refused: unknown[] = []
  server.on('refused', (e) => refused.push(e))
  const client = createLinkClient({ url: server.url, token: 'wrong', reconnect: { minDelayMs: 1, maxDelayMs: 5 } })
  defer(() => client.close())
  let reconnects = 0
  client.on('reconnect', () => reconnects++)
  const err = await rejection(client.connect())
  assert.is(err.code, ErrorCodes.UNAUTHENTICATED)
  assert.is(client.state, 'closed')
  assert.is(reconnects, 0)
  assert.is(refused.length, 1)
  assert.is(server.links.size, 0)
  const late = await rejection(client.request('sys/x', 1))
  assert.is(late.code, ErrorCodes.CONNECTION_CLOSED)
}))

test('authenticate throwing refuses too', timed(5000, async (defer) => {
  const server = await startServer(defer, { authenticate: () => { throw new Error('iam down') } })
  const client = createLinkClient({ url: server.url, token: TOKEN })
  defer(() => client.close())
  assert.is((await rejection(client.connect())).code, ErrorCodes.UNAUTHENTICATED)
}))

test('any frame before auth gets UNAUTHENTICATED and the socket is closed, unacted on', timed(5000, async (defer) => {
  let told = 0
  let asked = 0
  const server = await startServer(defer, { handler: { tell: () => { told++ }, request: () => { asked++ } } })
  for (const first of [{ k: 'tell', to: 'sys/a', m: 1 }, { k: 'request', id: 1, to: 'sys/a', m: 1 }, { k: 'ping' }, { k: 'bogus' }]) {
    const peer = await rawPeer(defer, server.url)
    peer.send(first)
    const err = await peer.frame((f) => f.k === 'error')
    assert.is((err.err as { code: string }).code, ErrorCodes.UNAUTHENTICATED)
    assert.is(await peer.closed, CLOSE_UNAUTHENTICATED)
  }
  const garbage = await rawPeer(defer, server.url)
  garbage.sendBytes(Buffer.from([0xc1, 0xff, 0x00]))
  assert.is(await garbage.closed, CLOSE_UNAUTHENTICATED)
  assert.is(told, 0)
  assert.is(asked, 0)
  assert.is(server.links.size, 0)
}))

test('a frame sent while authenticate is still deciding is refused, and the late yes admits nobody', timed(5000, async (defer) => {
  let release!: (v: unknown) => void
  const decided = new Promise((resolve) => { release = resolve })
  let told = 0
  const server = await startServer(defer, { authenticate: () => decided, handler: { tell: () => { told++ } } })
  const peer = await rawPeer(defer, server.url)
  peer.send({ k: 'auth', token: TOKEN })
  peer.send({ k: 'tell', to: 'sys/a', m: 'sneaky' })
  const err = await peer.frame((f) => f.k === 'error')
  assert.is((err.err as { code: string }).code, ErrorCodes.UNAUTHENTICATED)
  await peer.closed
  release(PRINCIPAL)
  await new Promise((r) => setTimeout(r, 20))
  assert.is(server.links.size, 0)
  assert.is(told, 0)
}))

test('a socket that never authenticates is closed after authTimeoutMs', timed(5000, async (defer) => {
  const server = await startServer(defer, { authTimeoutMs: 100 })
  const peer = await rawPeer(defer, server.url)
  assert.is(await peer.closed, CLOSE_UNAUTHENTICATED)
  assert.ok(peer.frames.some((f) => f.k === 'error' && (f.err as { code: string }).code === ErrorCodes.UNAUTHENTICATED))
}))

test('a session resumes only for the principal that opened it: another tenant\'s token with its id gets a session of its own', timed(5000, async (defer) => {
  const server = await startServer(defer, { authenticate: (t) => t === 'token-a' ? { tenant: 'a' } : t === 'token-b' ? { tenant: 'b' } : null })
  const opened = new Promise<string>((resolve) => server.once('link', (l) => resolve(l.sessionId)))
  const a = createLinkClient({ url: server.url, token: 'token-a' })
  defer(() => a.close())
  await a.connect()
  const sessionOfA = await opened
  const thief = await rawPeer(defer, server.url)
  thief.send({ k: 'auth', token: 'token-b', session: sessionOfA })
  const welcome = await thief.frame((f) => f.k === 'welcome')
  assert.is(welcome.resumed, false)
  assert.is.not(welcome.session, sessionOfA)
  // The owner, with its own token, still resumes it.
  const owner = await rawPeer(defer, server.url)
  owner.send({ k: 'auth', token: 'token-a', session: sessionOfA })
  const back = await owner.frame((f) => f.k === 'welcome')
  assert.is(back.resumed, true)
  assert.is(back.session, sessionOfA)
}))

test('sockets waiting to authenticate are capped: one more drops the one that waited longest (1013, OVERLOADED), never the newcomer', timed(5000, async (defer) => {
  const server = await startServer(defer, { maxUnauthenticated: 2 })
  const a = await rawPeer(defer, server.url)
  const b = await rawPeer(defer, server.url)
  const third = await rawPeer(defer, server.url)
  assert.is(await a.closed, CLOSE_TRY_AGAIN)
  assert.ok(a.frames.some((f) => f.k === 'error' && (f.err as { code: string }).code === ErrorCodes.OVERLOADED))
  assert.not.ok(b.isClosed())
  assert.not.ok(third.isClosed())
  // A client that authenticates at once gets in however full it is, and is no longer counted.
  await connect(defer, server)
  await b.closed
  assert.not.ok(third.isClosed(), 'the real client took the place of the oldest, then gave it back')
}))

test('the cap holds per source address too: the oldest of that address goes', timed(5000, async (defer) => {
  const server = await startServer(defer, { maxUnauthenticatedPerAddress: 2 })
  const a = await rawPeer(defer, server.url)
  const b = await rawPeer(defer, server.url)
  const c = await rawPeer(defer, server.url)
  assert.is(await a.closed, CLOSE_TRY_AGAIN)
  assert.not.ok(b.isClosed() || c.isClosed())
}))

test('a connection that never finishes its upgrade request is closed after authTimeoutMs too', timed(5000, async (defer) => {
  const server = await startServer(defer, { authTimeoutMs: 100 })
  const s = netConnect(server.port, '127.0.0.1')
  defer(() => s.destroy())
  s.on('error', () => {})
  s.write('GET / HTTP/1.1\r\nUpgrade: websocket\r\n')
  await new Promise((resolve) => s.once('close', resolve))
}))

test('the server link is told the client closed for good (bye), and rejects its own pending requests', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const client = await connect(defer, server, { handler: { request: () => new Promise(() => {}) } })
  const link = await waitFor(() => [...server.links][0])
  const pending = link.request('client/x', 1)
  const closed = once(link, 'close')
  client.close()
  await closed
  const err = await rejection(pending)
  assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED))
  assert.is(server.links.size, 0)
}))

test.run()
