import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes } from '../../src/errors.js'
import { createLinkClient, createLinkServer } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { connect, onlyLink, once, rejection, startServer, TOKEN } from './helpers.js'

test('after the server drops the socket the client reconnects into the same session', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (_to, m) => m } })
  const client = await connect(defer, server)
  const sessionId = client.sessionId
  const events: string[] = []
  for (const e of ['detach', 'reconnect', 'open'] as const) client.on(e, () => events.push(e))
  const serverLink = await onlyLink(server)
  serverLink.socket!.terminate()
  const [info] = await once(client, 'open')
  assert.ok(info.resumed)
  assert.is(client.sessionId, sessionId)
  assert.equal(events.slice(0, 3), ['detach', 'reconnect', 'open'])
  assert.is(server.links.size, 1)
  assert.is([...server.links][0], serverLink)
  assert.is(await client.request('sys/x', 'still here'), 'still here')
}))

test('a reply produced while the client was away is delivered after the resume', timed(5000, async (defer) => {
  let release!: (v: unknown) => void
  let called = false
  const server = await startServer(defer, {
    handler: { request: () => { called = true; return new Promise((resolve) => { release = resolve }) } }
  })
  const client = await connect(defer, server, { reconnect: { minDelayMs: 100, maxDelayMs: 100 } })
  const pending = client.request('sys/slow', 'q', { timeoutMs: 4000 })
  await waitFor(() => called)
  const serverLink = await onlyLink(server)
  const serverDetached = once(serverLink, 'detach')
  serverLink.socket!.terminate()
  await serverDetached
  // The server session is detached now: the reply waits in its outbox for the client to come back.
  release('answer')
  assert.is(await pending, 'answer')
}))

test('frames sent while detached are queued and delivered in order after the resume', timed(5000, async (defer) => {
  const got: unknown[] = []
  const server = await startServer(defer, { handler: { tell: (_to, m) => { got.push(m) } } })
  const client = await connect(defer, server, { reconnect: { minDelayMs: 50, maxDelayMs: 50 } })
  const detached = once(client, 'detach')
  ;(await onlyLink(server)).socket!.terminate()
  await detached
  assert.is(client.state, 'detached')
  for (let i = 0; i < 100; i++) client.tell('sys/t', i)
  await waitFor(() => got.length === 100)
  assert.equal(got, Array.from({ length: 100 }, (_, i) => i))
}))

test('when the server forgot the session, pending requests fail with CONNECTION_CLOSED and the link goes on', timed(5000, async (defer) => {
  const server = await startServer(defer, {
    sessionLingerMs: 0,
    handler: { request: (_to, m) => m === 'hang' ? new Promise(() => {}) : m }
  })
  const client = await connect(defer, server)
  const oldSession = client.sessionId
  const pending = client.request('sys/x', 'hang')
  await waitFor(() => client.inflightRequests === 1)
  const reopened = once(client, 'open')
  ;(await onlyLink(server)).socket!.terminate()
  const err = await rejection(pending)
  assert.is(err.code, ErrorCodes.CONNECTION_CLOSED)
  const [info] = await reopened
  assert.not.ok(info.resumed)
  assert.is.not(client.sessionId, oldSession)
  assert.is(await client.request('sys/x', 'fresh'), 'fresh')
}))

test('the link dies for good on close(): pending requests reject with CONNECTION_CLOSED', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: () => new Promise(() => {}) } })
  const client = await connect(defer, server)
  const pending = [client.request('sys/a', 1), client.request('sys/a', 2)]
  await waitFor(() => client.inflightRequests === 2)
  const closed = once(client, 'close')
  client.close()
  await closed
  for (const p of pending) assert.is((await rejection(p)).code, ErrorCodes.CONNECTION_CLOSED)
  assert.is(client.state, 'closed')
  assert.is((await rejection(client.request('sys/a', 3))).code, ErrorCodes.CONNECTION_CLOSED)
  assert.throws(() => client.tell('sys/a', 1), (e: { code: string }) => e.code === ErrorCodes.CONNECTION_CLOSED)
}))

test('a server that ends the session (bye) closes the client for good', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const client = await connect(defer, server, { handler: {} })
  const pending = client.request('sys/nothing-answers', 1)
  let reconnects = 0
  client.on('reconnect', () => reconnects++)
  const closed = once(client, 'close')
  ;(await onlyLink(server)).close()
  await closed
  assert.is((await rejection(pending)).code, ErrorCodes.CONNECTION_CLOSED)
  assert.is(reconnects, 0)
}))

test('reconnect backs off exponentially and gives up after maxAttempts', timed(5000, async (defer) => {
  // A port that was just free: nothing listens there.
  const probe = createLinkServer({ authenticate: () => null, host: '127.0.0.1' })
  await probe.listen()
  const url = probe.url
  await probe.close()
  const client = createLinkClient({ url, token: TOKEN, reconnect: { minDelayMs: 5, maxDelayMs: 15, factor: 2, jitter: 0, maxAttempts: 4 } })
  defer(() => client.close())
  const delays: number[] = []
  client.on('reconnect', ({ delayMs }) => delays.push(delayMs))
  const err = await rejection(client.connect())
  assert.is(err.code, ErrorCodes.CONNECTION_CLOSED)
  assert.equal(delays, [5, 10, 15, 15])
  assert.is(client.state, 'closed')
}))

test('a client started before its server connects once the server is up', timed(5000, async (defer) => {
  const probe = createLinkServer({ authenticate: () => null, host: '127.0.0.1' })
  const port = await probe.listen()
  await probe.close()
  const client = createLinkClient({ url: `ws://127.0.0.1:${port}`, token: TOKEN, reconnect: { minDelayMs: 10, maxDelayMs: 20 } })
  defer(() => client.close())
  const early = client.request('sys/x', 'queued before connecting')
  await once(client, 'reconnect')
  await startServer(defer, { port, handler: { request: (_to, m) => m } })
  await client.connect()
  assert.is(await early, 'queued before connecting')
}))

test.run()
