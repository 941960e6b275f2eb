import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createError, ErrorCodes } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'
import { connect, onlyLink, rejection, startServer } from './helpers.js'

test('requests are answered by correlation id, many in flight at once', timed(5000, async (defer) => {
  const server = await startServer(defer, {
    // Answer out of order: later requests often finish first.
    handler: { request: async (to, m) => { await new Promise((r) => setTimeout(r, Math.random() * 20)); return { to, n: m } } }
  })
  const client = await connect(defer, server)
  const answers = await Promise.all(Array.from({ length: 1000 }, (_, n) => client.request<{ to: string, n: number }>(`sys/a${n % 7}`, n)))
  answers.forEach((a, n) => assert.equal(a, { to: `sys/a${n % 7}`, n }))
  assert.is(client.inflightRequests, 0)
}))

test('a remote WarrenError crosses with its code and details; other errors become INTERNAL', timed(5000, async (defer) => {
  const server = await startServer(defer, {
    handler: {
      request: (to) => {
        if (to === 'sys/quota') throw createError(ErrorCodes.NO_CAPACITY, 'too many sandboxes', { limit: 3 })
        if (to === 'sys/async') return Promise.reject(createError(ErrorCodes.NOT_FOUND, 'no such file'))
        throw new TypeError('bug')
      }
    }
  })
  const client = await connect(defer, server)
  const quota = await rejection(client.request('sys/quota', 1))
  assert.is(quota.code, ErrorCodes.NO_CAPACITY)
  assert.is(quota.message, 'too many sandboxes')
  assert.equal(quota.details, { limit: 3 })
  assert.is((await rejection(client.request('sys/async', 1))).code, ErrorCodes.NOT_FOUND)
  const bug = await rejection(client.request('sys/other', 1))
  assert.is(bug.code, ErrorCodes.INTERNAL)
  assert.is(bug.message, 'bug')
}))

test('a request without an answer times out with ASK_TIMEOUT; the timeout travels with it', timed(5000, async (defer) => {
  const timeouts: Array<number | undefined> = []
  const server = await startServer(defer, { handler: { request: (_to, _m, _from, _link, t) => { timeouts.push(t); return new Promise(() => {}) } } })
  const client = await connect(defer, server)
  const started = Date.now()
  const err = await rejection(client.request('sys/never', 1, { timeoutMs: 100 }))
  assert.is(err.code, ErrorCodes.ASK_TIMEOUT)
  assert.ok(Date.now() - started >= 99)
  assert.is(client.inflightRequests, 0)
  const defaultAsk = client.request('sys/never', 2)
  defaultAsk.catch(() => {})
  await waitFor(() => timeouts.length === 2)
  assert.equal(timeouts, [100, 5000])
}))

test('outgoing requests in flight are bounded per link', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: () => new Promise(() => {}) } })
  const client = await connect(defer, server, { maxInflightRequests: 10 })
  const hanging = Array.from({ length: 10 }, () => client.request('sys/x', 1, { timeoutMs: 4000 }))
  hanging.forEach((p) => p.catch(() => {}))
  const err = await rejection(client.request('sys/x', 11))
  assert.is(err.code, ErrorCodes.OVERLOADED)
  assert.is(client.inflightRequests, 10)
}))

test('incoming requests being handled are bounded per link', timed(5000, async (defer) => {
  let handling = 0
  const server = await startServer(defer, { maxIncomingRequests: 5, handler: { request: () => { handling++; return new Promise(() => {}) } } })
  const client = await connect(defer, server)
  const hanging = Array.from({ length: 5 }, () => client.request('sys/x', 1, { timeoutMs: 4000 }))
  hanging.forEach((p) => p.catch(() => {}))
  await waitFor(() => handling === 5)
  const err = await rejection(client.request('sys/x', 6))
  assert.is(err.code, ErrorCodes.OVERLOADED)
  assert.is(handling, 5)
}))

test('no request handler answers NO_SUCH_ACTOR; an unencodable reply answers INVALID_ARGUMENT', timed(5000, async (defer) => {
  const bare = await startServer(defer)
  const c1 = await connect(defer, bare)
  assert.is((await rejection(c1.request('sys/x', 1))).code, ErrorCodes.NO_SUCH_ACTOR)
  const odd = await startServer(defer, { handler: { request: () => ({ s: Symbol('not msgpack') }) } })
  const c2 = await connect(defer, odd)
  assert.is((await rejection(c2.request('sys/x', 1))).code, ErrorCodes.INVALID_ARGUMENT)
}))

test('tells arrive complete and in order, coalesced into few WebSocket messages', timed(5000, async (defer) => {
  const got: Array<{ n: number, s: string }> = []
  const server = await startServer(defer, { handler: { tell: (_to, m) => { got.push(m as { n: number, s: string }) } } })
  const client = await connect(defer, server)
  const link = await onlyLink(server)
  let messages = 0
  link.socket!.on('message', () => messages++)
  for (let n = 0; n < 10_000; n++) client.tell('sys/sink', { n, s: `payload-${n}-${'x'.repeat(n % 50)}` })
  await waitFor(() => got.length === 10_000)
  got.forEach((m, n) => assert.equal(m, { n, s: `payload-${n}-${'x'.repeat(n % 50)}` }))
  assert.ok(messages < 100, `${messages} WebSocket messages for 10000 tells`)
}))

test('tell returns false above the high-water mark, then drain comes below the low-water mark', timed(5000, async (defer) => {
  let got = 0
  const server = await startServer(defer, { handler: { tell: () => { got++ } } })
  const client = await connect(defer, server, { highWaterMark: 64 * 1024, lowWaterMark: 16 * 1024 })
  const payload = 'y'.repeat(1024)
  let sent = 0
  while (client.tell('sys/sink', payload)) sent++
  sent++
  assert.ok(sent <= 66, `${sent} tells accepted before false`)
  assert.not.ok(client.writable)
  await new Promise<void>((resolve) => client.once('drain', resolve))
  assert.ok(client.bufferedAmount <= 16 * 1024)
  assert.ok(client.writable)
  await waitFor(() => got === sent)
}))

test('past the hard buffer cap, sends throw OVERLOADED instead of growing memory', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const client = await connect(defer, server, { highWaterMark: 32 * 1024, lowWaterMark: 8 * 1024, maxBufferedBytes: 128 * 1024 })
  const payload = 'z'.repeat(1024)
  let accepted = 0
  try {
    for (;;) { client.tell('sys/sink', payload); accepted++ }
  } catch (err) {
    assert.is((err as { code: string }).code, ErrorCodes.OVERLOADED)
  }
  assert.ok(accepted >= 100 && accepted <= 128, `${accepted} accepted`)
  assert.ok(client.bufferedAmount <= 128 * 1024)
  assert.is((await rejection(client.request('sys/x', payload))).code, ErrorCodes.OVERLOADED)
}))

test.run()
