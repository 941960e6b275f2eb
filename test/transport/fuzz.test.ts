/**
 * 10,000 hostile messages against a server that must stay up and keep serving a well-behaved
 * client on another connection. Each hostile message is followed by a probe request on the same
 * socket, so every message is known to have been processed (the probe is answered) or to have
 * closed the socket (then the fuzzer reconnects).
 */
import { randomBytes } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { WebSocket } from 'ws'
import { ErrorCodes } from '../../src/errors.js'
import { CLOSE_UNAUTHENTICATED, FrameKind } from '../../src/transport/index.js'
import { timed } from '../support/index.js'
import { codec, connect, startServer, TOKEN } from './helpers.js'

const TOTAL = 10_000
const FUZZERS = 4
const PRE_AUTH_EVERY = 20

const rnd = (n: number): number => Math.floor(Math.random() * n)
const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)]!
const kinds = Object.values(FrameKind)
const keys = ['k', 'id', 'to', 'm', 'from', 'sid', 'seq', 'd', 'ack', 'win', 'err', 'streams', 'token', 'session', 't', 'meta']

/** Any msgpack-encodable value, nested a little. */
function randomValue (depth = 0): unknown {
  switch (rnd(depth > 2 ? 8 : 11)) {
    case 0: return rnd(1000) - 500
    case 1: return Math.random() * 1e12
    case 2: return 2 ** 40 + rnd(1000)
    case 3: return randomBytes(rnd(20)).toString('latin1')
    case 4: return randomBytes(rnd(64))
    case 5: return Math.random() < 0.5
    case 6: return null
    case 7: return pick(['sys/a', '', 'x'.repeat(300), '__proto__', 'constructor'])
    case 8: return Array.from({ length: rnd(5) }, () => randomValue(depth + 1))
    case 9: return Object.fromEntries(Array.from({ length: rnd(5) }, () => [pick(keys), randomValue(depth + 1)]))
    default: return frameLike()
  }
}

/** A map that looks like a frame: a real or invented kind, with a random selection of fields. */
function frameLike (): Record<string, unknown> {
  const f: Record<string, unknown> = { k: Math.random() < 0.8 ? pick(kinds) : randomBytes(rnd(8)).toString('hex') }
  for (const key of keys) {
    if (key !== 'k' && Math.random() < 0.4) f[key] = Math.random() < 0.5 ? randomValue(3) : pick([1, 2, 3, 'sys/a', Buffer.alloc(3)])
  }
  return f
}

function hostileMessage (): Buffer {
  const r = Math.random()
  if (r < 0.7) return randomBytes(rnd(Math.random() < 0.05 ? 8192 : 512))
  if (r < 0.9) return codec.encode(frameLike() as never)
  // Several values in one message, some valid.
  return Buffer.concat(Array.from({ length: 1 + rnd(4) }, () => codec.encode((Math.random() < 0.3 ? { k: 'tell', to: 'sys/sink', m: 1 } : randomValue()) as never)))
}

interface Stats { sent: number, closed: number, preAuthClosed: number, errors: Map<string, number> }

class FuzzConnection {
  private readonly ws: WebSocket
  private waiting: ((outcome: 'alive' | 'closed') => void) | null = null
  private probeId = 0
  closeCode = 0
  readonly opened: Promise<boolean>

  constructor (url: string, stats: Stats) {
    this.ws = new WebSocket(url, { perMessageDeflate: false })
    this.ws.on('error', () => {})
    this.opened = new Promise((resolve) => {
      this.ws.once('open', () => resolve(true))
      this.ws.once('close', () => resolve(false))
    })
    this.ws.on('close', (code) => { this.closeCode = code; this.settle('closed') })
    this.ws.on('message', (data: Buffer) => {
      for (const v of codec.decode(data).values) {
        const f = v as Record<string, unknown>
        if (f.k === 'error') {
          const code = (f.err as { code: string }).code
          stats.errors.set(code, (stats.errors.get(code) ?? 0) + 1)
        }
        if ((f.k === 'reply' || f.k === 'error' || f.k === 'welcome') && (f.id === this.probeId || f.k === 'welcome')) this.settle('alive')
      }
    })
  }

  private settle (outcome: 'alive' | 'closed'): void {
    const w = this.waiting
    this.waiting = null
    w?.(outcome)
  }

  private next (): Promise<'alive' | 'closed'> {
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.resolve('closed')
    return new Promise((resolve) => { this.waiting = resolve })
  }

  async auth (): Promise<boolean> {
    if (!await this.opened) return false
    const outcome = this.next()
    this.ws.send(codec.encode({ k: 'auth', token: TOKEN }))
    return await outcome === 'alive'
  }

  /** Sends one hostile message and a probe; resolves when the probe is answered or the socket closed. */
  async throwMessage (bytes: Buffer): Promise<'alive' | 'closed'> {
    this.probeId = 1_000_000_000 + rnd(1_000_000)
    const outcome = this.next()
    this.ws.send(bytes)
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(codec.encode({ k: 'request', id: this.probeId, to: 'sys/echo', m: 'probe' }))
    return await outcome
  }

  /** Sends a hostile message as the very first frame; resolves with the close code. */
  async throwBeforeAuth (bytes: Buffer): Promise<number> {
    if (!await this.opened) return -1
    const outcome = this.next()
    this.ws.send(bytes)
    await outcome
    return this.closeCode
  }

  terminate (): void { this.ws.terminate() }
}

test(`${TOTAL} hostile messages: the server stays up and keeps serving a well-behaved client`, timed(180_000, async (defer) => {
  let tells = 0
  const server = await startServer(defer, {
    maxStreams: 64,
    handler: {
      tell: () => { tells++ },
      request: (to, m) => to === 'sys/echo' ? m : { to, m },
      stream: async (r) => { try { for await (const _c of r) { /* drain */ } } catch { /* fuzzed streams fail */ } }
    }
  })
  // The well-behaved client works throughout the fuzzing.
  const good = await connect(defer, server)
  let goodOk = 0
  let fuzzing = true
  const goodWork = (async () => {
    for (let n = 0; fuzzing || n < 50; n++) {
      assert.equal(await good.request('sys/echo', { n }), { n })
      good.tell('sys/sink', n)
      goodOk++
      await new Promise((r) => setImmediate(r))
    }
  })()
  goodWork.catch(() => {})

  const stats: Stats = { sent: 0, closed: 0, preAuthClosed: 0, errors: new Map() }
  const fuzzer = async (count: number): Promise<void> => {
    let conn: FuzzConnection | undefined
    try {
      for (let i = 0; i < count; i++) {
        if (i % PRE_AUTH_EVERY === 0) {
          const fresh = new FuzzConnection(server.url, stats)
          const code = await fresh.throwBeforeAuth(hostileMessage())
          assert.is(code, CLOSE_UNAUTHENTICATED)
          stats.preAuthClosed++
          stats.sent++
          continue
        }
        if (conn === undefined) {
          conn = new FuzzConnection(server.url, stats)
          assert.ok(await conn.auth(), 'the server refused a fresh, valid connection')
        }
        const outcome = await conn.throwMessage(hostileMessage())
        stats.sent++
        if (outcome === 'closed') {
          stats.closed++
          conn = undefined
        }
      }
    } finally {
      conn?.terminate()
    }
  }
  await Promise.all(Array.from({ length: FUZZERS }, () => fuzzer(TOTAL / FUZZERS)))
  fuzzing = false
  await goodWork

  assert.is(stats.sent, TOTAL)
  assert.ok(goodOk >= 50, `the good client completed only ${goodOk} rounds`)
  // The fuzz exercised both paths: refused frames on open sockets, and sockets closed as untrustworthy.
  assert.ok((stats.errors.get(ErrorCodes.MALFORMED_FRAME) ?? 0) > 100, JSON.stringify([...stats.errors]))
  assert.ok((stats.errors.get(ErrorCodes.UNKNOWN_FRAME_KIND) ?? 0) > 10, JSON.stringify([...stats.errors]))
  assert.ok(stats.closed > 100 && stats.closed < TOTAL, `${stats.closed} closes`)
  assert.is(stats.preAuthClosed, TOTAL / PRE_AUTH_EVERY)
  // Still serving: the old client, and a new one.
  assert.is(await good.request('sys/echo', 'after'), 'after')
  const late = await connect(defer, server)
  assert.is(await late.request('sys/echo', 'new client'), 'new client')
  process.stderr.write(`fuzz: ${stats.sent} sent, ${stats.closed} closed the socket, ${stats.preAuthClosed} before auth, ` +
    `errors ${JSON.stringify(Object.fromEntries(stats.errors))}, good client rounds ${goodOk}, fuzzed tells delivered ${tells}\n`)
}))

test.run()
