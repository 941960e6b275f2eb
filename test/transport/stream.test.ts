import { createHash, randomBytes } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createError, ErrorCodes } from '../../src/errors.js'
import type { Link, StreamReader, StreamWriter } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { connect, killTcp, onlyLink, rejection, startServer } from './helpers.js'

const MiB = 1024 * 1024

/** Writes `total` random bytes in random-sized chunks, honouring write() === false. */
async function produce (w: StreamWriter, total: number, maxChunk: number, onWrite?: () => void): Promise<{ bytes: number, sha256: string }> {
  const hash = createHash('sha256')
  let bytes = 0
  while (bytes < total) {
    const size = Math.min(total - bytes, 1 + Math.floor(Math.random() * maxChunk))
    const chunk = randomBytes(size)
    hash.update(chunk)
    bytes += size
    const ok = w.write(chunk)
    onWrite?.()
    if (!ok) {
      await new Promise<void>((resolve, reject) => {
        const onClose = (err: unknown): void => { w.off('drain', onDrain); reject(err ?? new Error('closed')) }
        const onDrain = (): void => { w.off('close', onClose); resolve() }
        w.once('drain', onDrain)
        w.once('close', onClose)
      })
    }
  }
  w.end()
  return { bytes, sha256: hash.digest('hex') }
}

/** Reads a stream to its end; `each` sees the running byte count after every chunk. */
async function consume (r: StreamReader, each?: (bytes: number) => void | Promise<void>): Promise<{ bytes: number, sha256: string }> {
  const hash = createHash('sha256')
  let bytes = 0
  for await (const chunk of r) {
    hash.update(chunk)
    bytes += chunk.length
    await each?.(bytes)
  }
  return { bytes, sha256: hash.digest('hex') }
}

test('a stream delivers its bytes in order with its meta, then ends', timed(5000, async (defer) => {
  let result: Promise<{ bytes: number, sha256: string }> | undefined
  let meta: unknown
  const server = await startServer(defer, { handler: { stream: (r) => { meta = r.meta; result = consume(r) } } })
  const client = await connect(defer, server)
  const w = client.openStream('sys/sink', { cmd: 'cat' })
  const finished = new Promise<void>((resolve) => w.once('finish', resolve))
  const sent = await produce(w, 3 * MiB, 200_000)
  await finished
  const got = await waitFor(() => result)
  assert.equal(await got, sent)
  assert.equal(meta, { cmd: 'cat' })
  assert.ok(w.closed)
  assert.is(w.bufferedBytes, 0)
}))

test('TCP killed mid-stream, twice: the resumed stream is byte-exact (count and sha256)', timed(20_000, async (defer) => {
  const TOTAL = 6 * MiB
  let produced: Promise<{ bytes: number, sha256: string }> | undefined
  // The server produces towards the client, as a sandbox's output flows back to a trainer.
  const server = await startServer(defer, {
    handler: {
      request: (_to, _m, _from, link) => {
        const w = link.openStream('client/sink', { total: TOTAL })
        produced = produce(w, TOTAL, 64 * 1024)
        return 'started'
      }
    }
  })
  let consumed: Promise<{ bytes: number, sha256: string }> | undefined
  const kills: number[] = []
  let clientLink!: Link
  const client = await connect(defer, server, {
    streamWindowBytes: 256 * 1024,
    handler: {
      stream: (r) => {
        consumed = consume(r, async (bytes) => {
          // Kill the client's TCP socket after 1 MiB, the server's after 3 MiB. The window (256 KiB)
          // guarantees the producer is far from done at both points, whatever the timing.
          if (kills.length === 0 && bytes >= 1 * MiB) { kills.push(bytes); killTcp(clientLink) }
          if (kills.length === 1 && bytes >= 3 * MiB && clientLink.state === 'open') {
            kills.push(bytes)
            killTcp(await onlyLink(server))
          }
        })
      }
    }
  })
  clientLink = client
  let resumes = 0
  client.on('open', ({ resumed }) => { if (resumed) resumes++ })
  assert.is(await client.request('sys/start', null), 'started')
  const got = await (await waitFor(() => consumed, 5000, 'the stream'))
  const sent = await (await waitFor(() => produced))
  assert.is(kills.length, 2)
  assert.is(resumes, 2)
  assert.is(got.bytes, TOTAL)
  assert.is(sent.bytes, TOTAL)
  assert.is(got.sha256, sent.sha256)
}))

test('client-to-server stream resumes after the server drops the socket', timed(10_000, async (defer) => {
  let consumed: Promise<{ bytes: number, sha256: string }> | undefined
  let server!: Awaited<ReturnType<typeof startServer>>
  let dropped = false
  server = await startServer(defer, {
    streamWindowBytes: 128 * 1024,
    handler: {
      stream: (r) => {
        consumed = consume(r, async (bytes) => {
          if (!dropped && bytes >= 512 * 1024) { dropped = true; (await onlyLink(server)).socket!.terminate() }
        })
      }
    }
  })
  const client = await connect(defer, server)
  const sent = await produce(client.openStream('sys/sink'), 2 * MiB, 32 * 1024)
  const got = await (await waitFor(() => consumed))
  assert.ok(dropped)
  assert.equal(got, sent)
}))

test('the replay after a resume goes out under backpressure, even when it exceeds the link hard cap', timed(10_000, async (defer) => {
  let consumed: Promise<{ bytes: number, sha256: string }> | undefined
  let serverLink: Link | undefined
  const server = await startServer(defer, {
    streamWindowBytes: 256 * 1024,
    handler: {
      stream: (r, link) => {
        // Grant credit (the reader just did) and stop reading: what the producer sends now never arrives.
        serverLink = link
        ;(link.socket as unknown as { _socket: { pause: () => void } })._socket.pause()
        consumed = consume(r)
      }
    }
  })
  const client = await connect(defer, server, {
    highWaterMark: 32 * 1024, lowWaterMark: 8 * 1024, maxBufferedBytes: 64 * 1024, streamChunkBytes: 16 * 1024
  })
  const w = client.openStream('sys/sink')
  const producing = produce(w, 1 * MiB, 16 * 1024)
  // The whole window is out of the producer's process, unacknowledged, in the replay buffer.
  await waitFor(() => w.credit <= 0 && client.bufferedAmount === 0)
  assert.ok(w.bufferedBytes >= 240 * 1024)
  const reopened = new Promise<{ resumed: boolean }>((resolve) => client.once('open', resolve))
  killTcp(serverLink!)
  // Resumed at sequence 0: the producer must replay 256 KiB through a link capped at 64 KiB.
  assert.ok((await reopened).resumed)
  const sent = await producing
  const got = await (await waitFor(() => consumed))
  assert.equal(got, sent)
}))

test('a slow consumer keeps the producer bounded: buffered bytes never pass window + one chunk', timed(15_000, async (defer) => {
  const WINDOW = 256 * 1024
  const server = await startServer(defer, {
    streamWindowBytes: WINDOW,
    handler: { stream: (r) => { void consume(r, () => new Promise((resolve) => setTimeout(resolve, 2))) } }
  })
  const client = await connect(defer, server, { highWaterMark: 128 * 1024, lowWaterMark: 32 * 1024, streamChunkBytes: 16 * 1024 })
  const w = client.openStream('sys/slow')
  let peakStream = 0
  let peakLink = 0
  const finished = new Promise<void>((resolve) => w.once('finish', resolve))
  await produce(w, 2 * MiB, 16 * 1024, () => {
    peakStream = Math.max(peakStream, w.bufferedBytes)
    peakLink = Math.max(peakLink, client.bufferedAmount)
  })
  await finished
  // One write past zero credit is accepted (then write() says false), hence + one chunk.
  assert.ok(peakStream <= WINDOW + 16 * 1024, `producer held ${peakStream} bytes`)
  assert.ok(peakLink <= 128 * 1024 + 32 * 1024, `link held ${peakLink} bytes`)
}))

test('a producer that ignores write() === false is stopped with OVERLOADED, not allowed to grow', timed(5000, async (defer) => {
  const server = await startServer(defer, { streamWindowBytes: 64 * 1024, handler: { stream: () => { /* never reads */ } } })
  const client = await connect(defer, server, { streamOverrunBytes: 256 * 1024 })
  const w = client.openStream('sys/stuck')
  const chunk = Buffer.alloc(16 * 1024)
  // A new stream has no credit until the consumer's first credit frame: the first write says false.
  assert.not.ok(w.write(chunk))
  await new Promise<void>((resolve) => w.once('drain', resolve))
  assert.is(w.credit, 64 * 1024 - 16 * 1024)
  let accepted = chunk.length
  try {
    for (;;) { w.write(chunk); accepted += chunk.length }
  } catch (err) {
    assert.is((err as { code: string }).code, ErrorCodes.OVERLOADED)
  }
  assert.ok(w.bufferedBytes <= 64 * 1024 + 256 * 1024, `${w.bufferedBytes} held`)
  assert.ok(accepted >= 64 * 1024)
}))

test('breaking out of the reader cancels the stream; the producer learns STREAM_CANCELLED', timed(5000, async (defer) => {
  const server = await startServer(defer, {
    handler: { stream: async (r) => { for await (const _chunk of r) break } }
  })
  const client = await connect(defer, server)
  const w = client.openStream('sys/quitter')
  const closed = new Promise<unknown>((resolve) => w.once('close', resolve))
  w.write(Buffer.alloc(1000))
  const err = await closed as { code: string }
  assert.is(err.code, ErrorCodes.STREAM_CANCELLED)
  assert.throws(() => w.write(Buffer.alloc(1)), (e: { code: string }) => e.code === ErrorCodes.STREAM_CANCELLED)
  await waitFor(() => [...server.links][0] !== undefined)
}))

test('a producer abort reaches the reader after the data already written', timed(5000, async (defer) => {
  let reader: StreamReader | undefined
  const server = await startServer(defer, { handler: { stream: (r) => { reader = r } } })
  const client = await connect(defer, server)
  const w = client.openStream('sys/sink')
  w.write(Buffer.from('partial output'))
  w.destroy(createError(ErrorCodes.SANDBOX_GONE, 'sandbox died'))
  const r = await waitFor(() => reader)
  assert.equal(Buffer.from((await r.read())!).toString(), 'partial output')
  const err = await rejection(r.read())
  assert.is(err.code, ErrorCodes.SANDBOX_GONE)
}))

test('a stream towards a side without a stream handler is refused', timed(5000, async (defer) => {
  const server = await startServer(defer)
  const client = await connect(defer, server)
  const w = client.openStream('sys/nobody')
  const err = await new Promise<{ code: string }>((resolve) => w.once('close', (e) => resolve(e as unknown as { code: string })))
  assert.is(err.code, ErrorCodes.NO_SUCH_ACTOR)
}))

test('open streams are bounded on both sides', timed(5000, async (defer) => {
  const server = await startServer(defer, { maxStreams: 2, handler: { stream: () => {} } })
  const client = await connect(defer, server, { maxStreams: 3 })
  const ws = [client.openStream('sys/a'), client.openStream('sys/b'), client.openStream('sys/c')]
  assert.throws(() => client.openStream('sys/d'), (e: { code: string }) => e.code === ErrorCodes.OVERLOADED)
  // The server takes two; the third is cancelled with OVERLOADED.
  const err = await new Promise<{ code: string }>((resolve) => ws[2]!.once('close', (e) => resolve(e as unknown as { code: string })))
  assert.is(err.code, ErrorCodes.OVERLOADED)
  assert.not.ok(ws[0]!.closed)
}))

test.run()
