/**
 * Transport benchmark, two processes on loopback. This process drives; a child (this file with
 * `--peer`) runs an ActorSystem exposed on a link server, plus a plain ws echo server as the
 * baseline.
 *
 *   tell_per_s        cross-process tells to an actor, until the actor has counted every one
 *   ask_per_s         asks to an echo actor with ASK_CONCURRENCY in flight
 *   stream_mb_per_s   one stream to a consumer that reads as fast as it can
 *   peak_buffered_mb  most bytes the producer held (its replay/pending buffer + the link's
 *                     socket buffers), over the fast run and a run against a slow consumer
 *   raw_ws_msgs_per_s plain ws: messages of the tell frame's size echoed back, pipelined
 *
 * Run: node dist/bench/transport.js   (progress on stderr, one JSON line last on stdout)
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { WebSocket, WebSocketServer } from 'ws'
import { Actor, ActorSystem } from '../src/actors/index.js'
import {
  createCodec, createLinkClient, createLinkServer, createRemoteRef, exposeSystem,
  type LinkClient, type StreamReader, type StreamWriter
} from '../src/transport/index.js'

const TOKEN = 'bench'
const TELLS = 2_000_000
const ASKS = 300_000
const ASK_CONCURRENCY = 512
const STREAM_BYTES = 1024 * 1024 * 1024
const STREAM_CHUNK = 256 * 1024
const SLOW_MS = 2000
const RAW_MSGS = 1_000_000
const RAW_WINDOW = 20_000
const MB = 1024 * 1024
/** The message every tell carries (and whose frame size the raw baseline copies). */
const TELL_MESSAGE = { op: 'progress', sandbox: 'sb-12345', n: 1 }

const log = (line: string): void => { process.stderr.write(`${line}\n`) }

// ---------------------------------------------------------------- peer (child process)

class Counter extends Actor {
  private n = 0
  receive (message: unknown): unknown {
    if (message === 'count') return this.n
    this.n++
    return undefined
  }
}

class Echo extends Actor {
  receive (message: unknown): unknown { return message }
}

/** Reads a stream; `slow` pauses after every chunk like a consumer busy with each one. */
async function drain (reader: StreamReader): Promise<void> {
  const slow = (reader.meta as { slow?: boolean } | undefined)?.slow === true
  try {
    for await (const _chunk of reader) {
      if (slow) await new Promise((resolve) => setTimeout(resolve, 5))
    }
  } catch { /* the driver cancels the slow stream */ }
}

async function peer (): Promise<void> {
  const system = new ActorSystem({ name: 'peer' })
  system.spawn(() => new Counter(), { name: 'sink', mailbox: { capacity: 1_000_000 } })
  system.spawn(() => new Echo(), { name: 'echo', mailbox: { capacity: 100_000 } })
  const server = createLinkServer({
    authenticate: (t) => t === TOKEN ? { who: 'bench' } : null,
    host: '127.0.0.1',
    handler: exposeSystem(system, { onStream: (r) => { void drain(r) } })
  })
  const port = await server.listen()
  const raw = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false })
  raw.on('connection', (ws) => ws.on('message', (data: Buffer) => ws.send(data)))
  await new Promise((resolve) => raw.once('listening', resolve))
  const rawPort = (raw.address() as { port: number }).port
  process.stdout.write(`PORTS ${port} ${rawPort}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => process.exit(0))
}

// ---------------------------------------------------------------- driver

function startPeer (): Promise<{ kill: () => void, port: number, rawPort: number }> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--peer'], { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString()
      const m = /PORTS (\d+) (\d+)/.exec(out)
      if (m !== null) resolve({ kill: () => child.kill('SIGKILL'), port: Number(m[1]), rawPort: Number(m[2]) })
    })
    child.once('exit', (code) => reject(new Error(`peer exited early (${code})`)))
  })
}

const waitDrain = (link: LinkClient): Promise<void> => new Promise((resolve) => link.once('drain', resolve))

async function benchTell (link: LinkClient): Promise<number> {
  const sink = createRemoteRef(link, 'peer/sink')
  const started = process.hrtime.bigint()
  for (let i = 0; i < TELLS; i++) {
    TELL_MESSAGE.n = i
    sink.tell(TELL_MESSAGE)
    // Pace by the link's backpressure: the flood never holds more than the high-water mark.
    if ((i & 1023) === 1023 && !link.writable) await waitDrain(link)
  }
  const counted = await sink.ask<number>('count', { timeoutMs: 60_000 })
  const s = Number(process.hrtime.bigint() - started) / 1e9
  if (counted !== TELLS) throw new Error(`the sink counted ${counted} of ${TELLS} tells`)
  return TELLS / s
}

async function benchAsk (link: LinkClient): Promise<number> {
  const echo = createRemoteRef(link, 'peer/echo')
  let next = 0
  const started = process.hrtime.bigint()
  const worker = async (): Promise<void> => {
    while (next < ASKS) {
      const i = next++
      const got = await echo.ask<number>(i)
      if (got !== i) throw new Error(`ask ${i} answered ${got}`)
    }
  }
  await Promise.all(Array.from({ length: ASK_CONCURRENCY }, worker))
  return ASKS / (Number(process.hrtime.bigint() - started) / 1e9)
}

/** Streams until `total` bytes or `ms` elapsed; returns MB/s and the producer's peak held bytes. */
async function benchStream (link: LinkClient, slow: boolean, total: number, ms: number): Promise<{ mbPerS: number, peak: number }> {
  const chunk = randomBytes(STREAM_CHUNK)
  const w: StreamWriter = link.openStream('peer/streams', { slow })
  let peak = 0
  let bytes = 0
  // Held bytes grow on writes and when credit lets queued chunks into the socket: sample at both
  // (drain follows credit) and on a 1 ms timer for anything in between.
  const sample = (): void => { peak = Math.max(peak, w.bufferedBytes + link.bufferedAmount) }
  const sampler = setInterval(sample, 1)
  const started = process.hrtime.bigint()
  const deadline = Date.now() + ms
  while (bytes < total && Date.now() < deadline) {
    const ok = w.write(chunk)
    bytes += chunk.length
    sample()
    if (!ok) await new Promise<void>((resolve) => w.once('drain', resolve))
    sample()
  }
  if (slow) {
    w.destroy()
  } else {
    w.end()
    await new Promise<void>((resolve) => w.once('finish', resolve))
  }
  const s = Number(process.hrtime.bigint() - started) / 1e9
  clearInterval(sampler)
  return { mbPerS: bytes / MB / s, peak }
}

async function benchRaw (rawPort: number, size: number): Promise<number> {
  const ws = new WebSocket(`ws://127.0.0.1:${rawPort}`, { perMessageDeflate: false })
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  const msg = randomBytes(size)
  let sent = 0
  let received = 0
  const started = process.hrtime.bigint()
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      // Pipelined, with at most RAW_WINDOW unanswered so neither side buffers without bound.
      while (sent < RAW_MSGS && sent - received < RAW_WINDOW) { ws.send(msg); sent++ }
    }
    ws.on('message', () => {
      received++
      if (received === RAW_MSGS) resolve()
      else if (sent - received < RAW_WINDOW / 2) pump()
    })
    pump()
  })
  const rate = RAW_MSGS / (Number(process.hrtime.bigint() - started) / 1e9)
  ws.terminate()
  return rate
}

async function driver (): Promise<void> {
  const peerProc = await startPeer()
  try {
    const link = createLinkClient({ url: `ws://127.0.0.1:${peerProc.port}`, token: TOKEN })
    await link.connect()
    const gc = (globalThis as { gc?: () => void }).gc
    log(`tell: ${TELLS} tells to peer/sink ...`)
    const tellPerS = await benchTell(link)
    log(`tell: ${Math.round(tellPerS)}/s`)
    gc?.()
    log(`ask: ${ASKS} asks, ${ASK_CONCURRENCY} in flight ...`)
    const askPerS = await benchAsk(link)
    log(`ask: ${Math.round(askPerS)}/s`)
    gc?.()
    log(`stream: ${STREAM_BYTES / MB} MB to a fast consumer ...`)
    const fast = await benchStream(link, false, STREAM_BYTES, 60_000)
    log(`stream: ${fast.mbPerS.toFixed(1)} MB/s, producer peak ${(fast.peak / MB).toFixed(2)} MB`)
    log(`stream: ${SLOW_MS} ms against a slow consumer ...`)
    const slow = await benchStream(link, true, Infinity, SLOW_MS)
    log(`stream (slow consumer): ${slow.mbPerS.toFixed(1)} MB/s, producer peak ${(slow.peak / MB).toFixed(2)} MB`)
    link.close()
    const frameSize = createCodec(1 << 20).encode({ k: 'tell', to: 'peer/sink', m: TELL_MESSAGE }).length
    log(`raw ws: ${RAW_MSGS} echoes of ${frameSize}-byte messages ...`)
    const rawPerS = await benchRaw(peerProc.rawPort, frameSize)
    log(`raw ws: ${Math.round(rawPerS)} msgs/s`)
    const result = {
      bench: 'transport',
      tell_per_s: Math.round(tellPerS),
      ask_per_s: Math.round(askPerS),
      stream_mb_per_s: Number(fast.mbPerS.toFixed(1)),
      peak_buffered_mb: Number((Math.max(fast.peak, slow.peak) / MB).toFixed(2)),
      raw_ws_msgs_per_s: Math.round(rawPerS),
      tell_vs_raw_ws: Number((tellPerS / rawPerS).toFixed(2)),
      peak_buffered_mb_slow_consumer: Number((slow.peak / MB).toFixed(2)),
      slow_consumer_mb_per_s: Number(slow.mbPerS.toFixed(1)),
      tell_frame_bytes: frameSize,
      ask_concurrency: ASK_CONCURRENCY
    }
    process.stdout.write(`${JSON.stringify(result)}\n`)
  } finally {
    peerProc.kill()
  }
}

if (process.argv.includes('--peer')) await peer()
else await driver()
