/**
 * The agent protocol: the TypeScript mirror matches the C header, the codec cuts frames however
 * the bytes arrive, and a real agent answers malformed, unknown, oversized and random frames
 * with errors and keeps serving.
 */
import { randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { createConnection, type Socket } from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pack, unpack } from 'msgpackr'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import {
  AgentLimits, connectAgent, ContainerDefaults, decodeBody, encodeFrame, FrameReader, type AgentMessage
} from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { launch, registerLeftoverCheck, sandboxTest } from './helpers.js'

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..')

test('the TypeScript limits mirror agent/protocol.h', () => {
  const header = readFileSync(join(repo, 'src', 'backends', 'container', 'agent', 'protocol.h'), 'utf8')
  const define = (name: string): number => {
    const m = new RegExp(`#define ${name} (.+)`).exec(header)
    assert.ok(m, `${name} is defined`)
    // The values are integer arithmetic on literals, e.g. (16 * 1024 * 1024 + 64 * 1024).
    assert.match(m[1]!, /^[\d\s()*+]+$/)
    return Function(`return ${m[1]!}`)() as number
  }
  assert.is(define('WARREN_PROTOCOL_VERSION'), AgentLimits.version)
  assert.is(define('WARREN_MAX_FRAME_BYTES'), AgentLimits.maxFrameBytes)
  assert.is(define('WARREN_MAX_FILE_BYTES'), AgentLimits.maxFileBytes)
  assert.is(define('WARREN_DEFAULT_MAX_OUTPUT_BYTES'), AgentLimits.defaultMaxOutputBytes)
  assert.is(define('WARREN_MAX_LIST_ENTRIES'), AgentLimits.maxListEntries)
  assert.is(define('WARREN_MAX_ARGS'), AgentLimits.maxArgs)
  assert.is(define('WARREN_MAX_PATH'), AgentLimits.maxPath)
  assert.is(define('WARREN_MAX_CONNS'), AgentLimits.maxConns)
  assert.is(define('WARREN_MAX_EXECS'), AgentLimits.maxExecs)
  assert.is(define('WARREN_STDIN_WINDOW_BYTES'), AgentLimits.stdinWindowBytes)
  assert.is(define('WARREN_STDIN_MAX_BYTES'), AgentLimits.stdinMaxBytes)
  for (const code of header.matchAll(/"(WARREN_ERR_\w+)"/g)) assert.ok(Object.values(ErrorCodes).includes(code[1] as never), code[1])
})

/** A frame as the agent would send it (the codec decodes agent messages). */
function agentFrame (msg: Record<string, unknown>): Buffer {
  const body = pack(msg)
  const head = Buffer.alloc(4)
  head.writeUInt32BE(body.length)
  return Buffer.concat([head, body])
}

test('the frame reader cuts frames however the stream is split', () => {
  const msgs: AgentMessage[] = [
    { t: 'ok', id: 1 },
    { t: 'out', id: 2, seq: 0, fd: 1, data: Buffer.from('hello') },
    { t: 'exit', id: 2, seq: 1, code: 0, timedOut: false, truncated: false, killed: false, durationMs: 3 }
  ]
  const stream = Buffer.concat(msgs.map((m) => agentFrame(m as Record<string, unknown>)))
  for (let cut = 0; cut <= stream.length; cut++) {
    const r = new FrameReader()
    const got = [...r.push(stream.subarray(0, cut)), ...r.push(stream.subarray(cut))]
    assert.is(got.length, 3)
    assert.is(got[1]!.t, 'out')
    assert.is(Buffer.from((got[1] as { data: Uint8Array }).data).toString(), 'hello')
  }
  const oneByOne = new FrameReader()
  const got: AgentMessage[] = []
  for (const b of stream) got.push(...oneByOne.push(Buffer.from([b])))
  assert.is(got.length, 3)
})

test('the codec refuses oversized, malformed and unknown frames', () => {
  const big = Buffer.alloc(4)
  big.writeUInt32BE(AgentLimits.maxFrameBytes + 1)
  assert.throws(() => new FrameReader().push(big), (e: unknown) => isWarrenError(e, ErrorCodes.FRAME_TOO_LARGE))
  assert.throws(() => new FrameReader().push(Buffer.alloc(4)), (e: unknown) => isWarrenError(e, ErrorCodes.MALFORMED_FRAME))
  assert.throws(() => decodeBody(pack([1, 2])), (e: unknown) => isWarrenError(e, ErrorCodes.MALFORMED_FRAME))
  assert.throws(() => decodeBody(pack({ t: 'out', id: 1, seq: 0, fd: 3, data: Buffer.alloc(1) })), (e: unknown) => isWarrenError(e, ErrorCodes.MALFORMED_FRAME))
  assert.throws(() => decodeBody(pack({ t: 'what', id: 1 })), (e: unknown) => isWarrenError(e, ErrorCodes.UNKNOWN_FRAME_KIND))
  assert.throws(() => decodeBody(Buffer.from([0xc1])), (e: unknown) => isWarrenError(e, ErrorCodes.MALFORMED_FRAME))
  assert.throws(() => encodeFrame({ t: 'write', id: 1, path: '/x', data: new Uint8Array(100) }, 50), (e: unknown) => isWarrenError(e, ErrorCodes.FRAME_TOO_LARGE))
  // Undefined fields are left out rather than sent as an extension the agent would reject.
  const f = encodeFrame({ t: 'read', id: 1, path: '/x', offset: undefined })
  assert.equal(unpack(f.subarray(4)), { t: 'read', id: 1, path: '/x' })
})

/** A raw connection to an agent: send bytes, read decoded frames. */
async function rawConnection (socketPath: string): Promise<{ socket: Socket, frames: AgentMessage[], closed: () => boolean }> {
  const socket = createConnection({ path: socketPath })
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  const reader = new FrameReader()
  const frames: AgentMessage[] = []
  let closed = false
  socket.on('data', (c: Buffer) => frames.push(...reader.push(c)))
  socket.on('close', () => { closed = true })
  socket.on('error', () => {})
  return { socket, frames, closed: () => closed }
}

function rawFrame (body: Uint8Array): Buffer {
  const head = Buffer.alloc(4)
  head.writeUInt32BE(body.length)
  return Buffer.concat([head, body])
}

sandboxTest('malformed, unknown and mistyped frames get errors; the connection lives on', timed(10_000, async (defer) => {
  const sb = await launch(defer)
  const c = await rawConnection(sb.socketPath)
  defer(() => c.socket.destroy())
  const cases: Array<[Uint8Array, number, string]> = [
    [Buffer.from([0x01]), 0, ErrorCodes.MALFORMED_FRAME],
    [pack({ id: 5 }), 5, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'frobnicate', id: 6 }), 6, ErrorCodes.UNKNOWN_FRAME_KIND],
    [pack({ t: 'exec', id: 7, argv: 'sh' }), 7, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'exec', id: 8, argv: ['a\0b'] }), 8, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'ping', id: 9 }).subarray(0, -1), 0, ErrorCodes.MALFORMED_FRAME],
    [Buffer.concat([pack({ t: 'ping', id: 10 }), Buffer.from([0])]), 10, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'read', id: 11, path: 42 }), 11, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'exec', id: 12, argv: [], timeoutMs: -1 }), 12, ErrorCodes.MALFORMED_FRAME],
    [pack({ t: 'exec', id: 13 }), 13, ErrorCodes.INVALID_ARGUMENT],
    [pack({ t: 'exec', id: 14, argv: ['true'], env: { 'A=B': 'c' } }), 14, ErrorCodes.INVALID_ARGUMENT],
    [pack({ t: 'kill', id: 15, exec: 1, signal: 999 }), 15, ErrorCodes.INVALID_ARGUMENT]
  ]
  for (const [body] of cases) c.socket.write(rawFrame(body))
  await waitFor(() => c.frames.length >= cases.length, 3000, 'an answer to every frame')
  assert.equal(c.frames.map((f) => [f.id, f.t === 'err' ? f.code : f.t]), cases.map(([, id, code]) => [id, code]))
  // Unknown keys and values of any type (here a msgpack extension) are skipped.
  c.socket.write(rawFrame(pack({ t: 'ping', id: 20, extra: new Date(), nested: { a: [1, { b: 2.5 }] } })))
  // A frame that arrives one byte at a time is still one frame.
  for (const b of rawFrame(pack({ t: 'ping', id: 21 }))) c.socket.write(Buffer.from([b]))
  await waitFor(() => c.frames.length >= cases.length + 2, 3000, 'the pings')
  assert.equal(c.frames.slice(-2).map((f) => [f.t, f.id]), [['ok', 20], ['ok', 21]])
}))

sandboxTest('an oversized or empty length is answered, then the connection is closed', timed(10_000, async (defer) => {
  const sb = await launch(defer)
  for (const [length, code] of [[0xffffffff, ErrorCodes.FRAME_TOO_LARGE], [0, ErrorCodes.MALFORMED_FRAME]] as const) {
    const c = await rawConnection(sb.socketPath)
    defer(() => c.socket.destroy())
    const head = Buffer.alloc(8)
    head.writeUInt32BE(length)
    c.socket.write(head)
    await waitFor(() => c.closed(), 3000, 'the agent to hang up')
    assert.equal(c.frames.map((f) => f.t === 'err' && f.code), [code])
  }
  const ok = await rawConnection(sb.socketPath)
  defer(() => ok.socket.destroy())
  ok.socket.write(rawFrame(pack({ t: 'ping', id: 1 })))
  await waitFor(() => ok.frames.length === 1, 3000, 'a ping on a new connection')
}))

sandboxTest('random and mutated frames never crash the agent', timed(30_000, async (defer) => {
  const sb = await launch(defer)
  const c = await rawConnection(sb.socketPath)
  defer(() => c.socket.destroy())
  const valid = [
    pack({ t: 'exec', id: 1, argv: ['true'], env: { A: 'b' }, cwd: '/', timeoutMs: 1000, stdin: Buffer.from('x') }),
    pack({ t: 'write', id: 2, path: '/tmp/fuzz', data: Buffer.from('data'), mode: 0o644 }),
    pack({ t: 'list', id: 3, path: '/tmp' }),
    pack({ t: 'stat', id: 4, path: '/tmp', follow: true })
  ]
  let sent = 0
  for (let i = 0; i < 2000; i++) {
    let body: Buffer
    if (i % 2 === 0) {
      body = randomBytes(1 + Math.floor(Math.random() * 100))
    } else {
      body = Buffer.from(valid[i % valid.length]!)
      for (let k = 0; k < 3; k++) body[Math.floor(Math.random() * body.length)] = Math.floor(Math.random() * 256)
    }
    c.socket.write(rawFrame(body))
    sent++
  }
  c.socket.write(rawFrame(pack({ t: 'ping', id: 424242 })))
  await waitFor(() => c.frames.some((f) => f.id === 424242), 20_000, 'the agent to answer after the fuzz')
  assert.ok(sent === 2000 && !c.closed())
}))

sandboxTest('outside a sandbox the agent serves a socket it binds (as it will serve a VM\'s port)', timed(10_000, async (defer) => {
  const dir = await mkdtemp(join(tmpdir(), 'wct-agent-'))
  defer(() => rm(dir, { recursive: true, force: true }))
  const socketPath = join(dir, 'agent.sock')
  const agent = spawn(ContainerDefaults.agentPath, ['agent', '--socket', socketPath], { stdio: 'ignore' })
  defer(() => { agent.kill('SIGKILL') })
  // The socket's file appears at bind(2), before listen(2): a connect in between is refused.
  const client = await waitFor(async () => existsSync(socketPath) ? await connectAgent(socketPath).catch(() => undefined) : undefined, 3000, 'the agent to listen')
  defer(() => client.close())
  const pong = await client.ping()
  assert.is(pong.pid, agent.pid)
  let out = ''
  const r = await client.exec(['sh', '-c', 'echo $((6 * 7))'], {}, { onStdout: (c) => { out += Buffer.from(c).toString() } })
  assert.equal([r.exitCode, out], [0, '42\n'])
  await client.files.write(join(dir, 'sub', 'f'), Buffer.from('x'))
  assert.is(Buffer.from(await client.files.read(join(dir, 'sub', 'f'))).toString(), 'x')
}))

registerLeftoverCheck()
test.run()
