import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createError, ErrorCodes } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'
import { codec, connect, onlyLink, rawAuthed, rejection, startServer } from './helpers.js'

const KiB = 1024

/** The error code carried by an error frame. */
const codeOf = (f: Record<string, unknown>): string => (f.err as { code: string }).code

test('an oversize frame is refused with FRAME_TOO_LARGE and the connection stays usable', timed(5000, async (defer) => {
  const got: unknown[] = []
  const server = await startServer(defer, {
    maxFrameBytes: 64 * KiB,
    maxMessageBytes: 1024 * KiB,
    batchBytes: 64 * KiB,
    streamChunkBytes: 32 * KiB,
    handler: { tell: (_to, m) => { got.push(m) }, request: (_to, m) => m }
  })
  const peer = await rawAuthed(defer, server.url)
  peer.send({ k: 'tell', to: 'sys/a', m: 'x'.repeat(100 * KiB) })
  const err = await peer.frame((f) => f.k === 'error')
  assert.is(codeOf(err), ErrorCodes.FRAME_TOO_LARGE)
  assert.is((err.err as { details: { limit: number } }).details.limit, 64 * KiB)
  // An oversize request is answered by its id, so the asker does not wait for a timeout.
  peer.send({ k: 'request', id: 77, to: 'sys/a', m: 'y'.repeat(100 * KiB) })
  const byId = await peer.frame((f) => f.k === 'error' && f.id === 77)
  assert.is(codeOf(byId), ErrorCodes.FRAME_TOO_LARGE)
  // Still open: a normal request on the same socket is answered.
  peer.send({ k: 'request', id: 78, to: 'sys/a', m: 'small' })
  const reply = await peer.frame((f) => f.k === 'reply' && f.id === 78)
  assert.is(reply.m, 'small')
  assert.equal(got, [])
  assert.not.ok(peer.isClosed())
}))

test('our own client refuses an oversize frame locally, before it reaches the wire', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (_to, m) => m } })
  const client = await connect(defer, server)
  const big = Buffer.alloc(2 * 1024 * KiB)
  assert.is((await rejection(client.request('sys/a', big))).code, ErrorCodes.FRAME_TOO_LARGE)
  assert.throws(() => client.tell('sys/a', big), (e: { code: string }) => e.code === ErrorCodes.FRAME_TOO_LARGE)
  assert.is(await client.request('sys/a', 'fine'), 'fine')
}))

test('a WebSocket message over maxMessageBytes is cut off by ws with close code 1009', timed(5000, async (defer) => {
  const server = await startServer(defer, { maxFrameBytes: 64 * KiB, maxMessageBytes: 256 * KiB, batchBytes: 64 * KiB, streamChunkBytes: 32 * KiB })
  const peer = await rawAuthed(defer, server.url)
  peer.sendBytes(Buffer.alloc(300 * KiB))
  assert.is(await peer.closed, 1009)
}))

test('unknown kinds and wrong shapes get error frames; the connection stays open', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (_to, m) => m } })
  const peer = await rawAuthed(defer, server.url)
  const cases: Array<[unknown, string]> = [
    [{ k: 'teleport', to: 'sys/a' }, ErrorCodes.UNKNOWN_FRAME_KIND],
    [42, ErrorCodes.MALFORMED_FRAME],
    [['tell', 'sys/a'], ErrorCodes.MALFORMED_FRAME],
    [{ to: 'sys/a' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'data', sid: 'one', seq: 1, d: 'x' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'auth', token: 'again' }, ErrorCodes.PROTOCOL_VIOLATION],
    [{ k: 'resume', streams: [] }, ErrorCodes.PROTOCOL_VIOLATION]
  ]
  for (const [value, code] of cases) {
    const from = peer.frames.length
    peer.sendBytes(codec.encode(value as never))
    const err = await peer.frame((f) => f.k === 'error', from)
    assert.is(codeOf(err), code, JSON.stringify(value))
  }
  // A request missing its address is answered by id.
  peer.send({ k: 'request', id: 5, m: 1 })
  assert.is(codeOf(await peer.frame((f) => f.k === 'error' && f.id === 5)), ErrorCodes.MALFORMED_FRAME)
  peer.send({ k: 'request', id: 6, to: 'sys/a', m: 'alive' })
  assert.is((await peer.frame((f) => f.k === 'reply' && f.id === 6)).m, 'alive')
  assert.not.ok(peer.isClosed())
}))

test('in a message of several frames, the bad one is refused and the good ones are served', timed(5000, async (defer) => {
  const got: unknown[] = []
  const server = await startServer(defer, { handler: { tell: (_to, m) => { got.push(m) } } })
  const peer = await rawAuthed(defer, server.url)
  peer.sendBytes(Buffer.concat([
    codec.encode({ k: 'tell', to: 'sys/a', m: 1 }),
    codec.encode({ k: 'nonsense' } as never),
    codec.encode({ k: 'tell', to: 'sys/a', m: 2 })
  ]))
  assert.is(codeOf(await peer.frame((f) => f.k === 'error')), ErrorCodes.UNKNOWN_FRAME_KIND)
  await waitFor(() => got.length === 2)
  assert.equal(got, [1, 2])
}))

test('undecodable bytes get MALFORMED_FRAME and the socket is closed (1007); no frame of that message is acted on', timed(5000, async (defer) => {
  const got: unknown[] = []
  const server = await startServer(defer, { handler: { tell: (_to, m) => { got.push(m) } } })
  const peer = await rawAuthed(defer, server.url)
  peer.sendBytes(Buffer.concat([codec.encode({ k: 'tell', to: 'sys/a', m: 'before garbage' }), Buffer.from([0xd9, 0x20, 0x41])]))
  assert.is(codeOf(await peer.frame((f) => f.k === 'error')), ErrorCodes.MALFORMED_FRAME)
  assert.is(await peer.closed, 1007)
  assert.equal(got, [])
}))

test('a text message gets MALFORMED_FRAME and the socket is closed (1003)', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const peer = await rawAuthed(defer, server.url)
  peer.sendBytes('{"k":"tell"}', false)
  assert.is(codeOf(await peer.frame((f) => f.k === 'error')), ErrorCodes.MALFORMED_FRAME)
  assert.is(await peer.closed, 1003)
}))

test('a stream producer that exceeds its credit is cut off with PROTOCOL_VIOLATION', timed(5000, async (defer) => {
  const server = await startServer(defer, { streamWindowBytes: 1000, handler: { stream: () => { /* never reads */ } } })
  const peer = await rawAuthed(defer, server.url)
  peer.send({ k: 'open', sid: 1, to: 'sys/s' })
  await peer.frame((f) => f.k === 'credit' && f.sid === 1)
  peer.send({ k: 'data', sid: 1, seq: 1, d: Buffer.alloc(600) })
  peer.send({ k: 'data', sid: 1, seq: 2, d: Buffer.alloc(600) })
  const cancel = await peer.frame((f) => f.k === 'cancel' && f.sid === 1)
  assert.is(codeOf(cancel), ErrorCodes.PROTOCOL_VIOLATION)
}))


test('a message of more frames than maxFramesPerMessage closes the link (1008, PROTOCOL_VIOLATION) before any is handled', timed(5000, async (defer) => {
  const got: unknown[] = []
  const server = await startServer(defer, { maxFramesPerMessage: 50, handler: { tell: (_to, m) => { got.push(m) } } })
  const peer = await rawAuthed(defer, server.url)
  const frames = Array.from({ length: 51 }, (_, i) => codec.encode({ k: 'tell', to: 'sys/a', m: i }))
  peer.sendBytes(Buffer.concat(frames))
  const err = await peer.frame((f) => f.k === 'error')
  assert.is(codeOf(err), ErrorCodes.PROTOCOL_VIOLATION)
  assert.is(await peer.closed, 1008)
  assert.equal(got, [])
}))

test('a peer that goes on sending refused frames past its refusal budget is closed with PROTOCOL_VIOLATION', timed(5000, async (defer) => {
  const server = await startServer(defer, { maxRefusalsPerSecond: 0.001, refusalBurst: 5, handler: { request: (_to, m) => m } })
  const peer = await rawAuthed(defer, server.url)
  for (let i = 0; i < 4; i++) peer.send({ k: 'teleport', to: 'sys/a' })
  // Within the budget: refused, and still served.
  peer.send({ k: 'request', id: 1, to: 'sys/a', m: 'still here' })
  assert.is((await peer.frame((f) => f.k === 'reply' && f.id === 1)).m, 'still here')
  for (let i = 0; i < 3; i++) peer.send({ k: 'teleport', to: 'sys/a' })
  const bye = await peer.frame((f) => f.k === 'bye')
  assert.is(codeOf(bye), ErrorCodes.PROTOCOL_VIOLATION)
  await peer.closed
}))

test('holdReading: what the peer sends meanwhile is handled once the hold ends, not before', timed(5000, async (defer) => {
  const server = await startServer(defer, { handler: { request: (_to, m) => m } })
  const client = await connect(defer, server)
  const link = await onlyLink(server)
  link.holdReading(300, createError(ErrorCodes.QUOTA, 'held'))
  const started = performance.now()
  assert.is(await client.request('sys/a', 'after'), 'after')
  assert.ok(performance.now() - started >= 290, `answered after ${performance.now() - started} ms`)
  // Not held any more: answered at once after.
  assert.is(await client.request('sys/a', 'now'), 'now')
}))

test.run()
