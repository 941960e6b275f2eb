import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { createCodec, FrameProblem, parseFrame, transportDefaults, type Frame } from '../../src/transport/index.js'
import { resolveLinkOptions } from '../../src/transport/defaults.js'

const codec = createCodec(64 * 1024)

const samples: Frame[] = [
  { k: 'auth', token: 'tok', session: 's1' },
  { k: 'welcome', session: 's1', resumed: true, streams: [[1, 5, 3, 1024]] },
  { k: 'tell', to: 'sys/a', m: { n: 1, s: 'x', list: [1, 2, 3] }, from: 'other/b' },
  { k: 'request', id: 7, to: 'sys/a', m: ['ask', 42], t: 5000 },
  { k: 'reply', id: 7, m: { ok: true } },
  { k: 'error', id: 7, err: { code: ErrorCodes.NO_SUCH_ACTOR, message: 'no', details: { address: 'sys/x' } } },
  { k: 'error', err: { code: ErrorCodes.MALFORMED_FRAME, message: 'bad' } },
  { k: 'open', sid: 3, to: 'sys/sink', meta: { cmd: 'ls' } },
  { k: 'data', sid: 3, seq: 1, d: Buffer.from([0, 1, 2, 255]) },
  { k: 'end', sid: 3, seq: 2 },
  { k: 'end', sid: 3, seq: 2, err: { code: ErrorCodes.STREAM_CANCELLED, message: 'gone' } },
  { k: 'credit', sid: 3, ack: 1, win: 65536 },
  { k: 'cancel', sid: 3 },
  { k: 'resume', streams: [[3, 1, 1, 65536]] },
  { k: 'ping' },
  { k: 'pong' },
  { k: 'bye' }
]

test('every frame kind survives encode, decode and validation unchanged', () => {
  for (const f of samples) {
    const { values, sizes } = codec.decode(codec.encode(f))
    assert.is(values.length, 1)
    assert.is(sizes[0], codec.encode(f).length)
    const parsed = parseFrame(values[0])
    assert.not.ok(parsed instanceof FrameProblem, `${f.k}: ${(parsed as FrameProblem).message}`)
    assert.equal({ ...parsed as object }, { ...f }, f.k)
  }
})

test('encode returns owned bytes; the shared view is overwritten by the next encode', () => {
  const a = codec.encode({ k: 'tell', to: 'sys/a', m: 'first message' })
  const copyOfA = Buffer.from(a)
  const shared = codec.encodeShared({ k: 'tell', to: 'sys/a', m: 'first message' })
  const sharedSnapshot = Buffer.from(shared)
  codec.encode({ k: 'tell', to: 'sys/b', m: 'other message' })
  codec.encodeShared({ k: 'tell', to: 'sys/z', m: 'zzzzz zzzzzzz' })
  assert.ok(a.equals(copyOfA), 'owned bytes changed after later encodes')
  // This is why the outbox copies: msgpackr reuses its scratch buffer.
  assert.not.ok(Buffer.from(shared).equals(sharedSnapshot), 'msgpackr no longer reuses its buffer; the copy could go')
})

test('several frames in one message decode in order with their sizes', () => {
  const parts = samples.map((f) => codec.encode(f))
  const { values, sizes } = codec.decode(Buffer.concat(parts))
  assert.is(values.length, samples.length)
  assert.equal(sizes, parts.map((p) => p.length))
  assert.equal(values.map((v) => (v as Frame).k), samples.map((f) => f.k))
})

test('a frame over the size limit does not encode', () => {
  const small = createCodec(1000)
  try {
    small.encode({ k: 'tell', to: 'sys/a', m: 'x'.repeat(2000) })
    assert.unreachable('encoded an oversize frame')
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.FRAME_TOO_LARGE))
    assert.is(err.details?.limit, 1000)
  }
})

test('an unencodable value is INVALID_ARGUMENT, not a crash', () => {
  try {
    codec.encode({ k: 'tell', to: 'sys/a', m: { s: Symbol('x') } })
    assert.unreachable()
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT))
  }
})

test('undecodable bytes are MALFORMED_FRAME, and a good frame before them is not returned', () => {
  for (const bytes of [Buffer.from([0xd9, 0x05, 0x61]), Buffer.from([0x92, 0x01]), Buffer.alloc(0), Buffer.concat([codec.encode({ k: 'ping' }), Buffer.from([0xdb, 0xff, 0xff])])]) {
    try {
      codec.decode(bytes)
      assert.unreachable(`decoded ${bytes.toString('hex')}`)
    } catch (err) {
      assert.ok(isWarrenError(err, ErrorCodes.MALFORMED_FRAME), String(err))
    }
  }
})

test('parseFrame refuses wrong shapes with the right code', () => {
  const cases: Array<[unknown, string, number?]> = [
    [42, ErrorCodes.MALFORMED_FRAME],
    ['tell', ErrorCodes.MALFORMED_FRAME],
    [null, ErrorCodes.MALFORMED_FRAME],
    [[1, 2], ErrorCodes.MALFORMED_FRAME],
    [Buffer.from('x'), ErrorCodes.MALFORMED_FRAME],
    [{ kind: 'tell' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 7 }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'teleport', to: 'x' }, ErrorCodes.UNKNOWN_FRAME_KIND],
    [{ k: 'toString' }, ErrorCodes.UNKNOWN_FRAME_KIND],
    [{ k: 'tell' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'tell', to: '' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'request', id: 9, m: 1 }, ErrorCodes.MALFORMED_FRAME, 9],
    [{ k: 'request', id: -1, to: 'a/b' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'request', id: 1.5, to: 'a/b' }, ErrorCodes.MALFORMED_FRAME],
    // A timeout past Node's 32-bit timer range would fire at once: refused.
    [{ k: 'request', id: 2, to: 'a/b', t: 2 ** 40 }, ErrorCodes.MALFORMED_FRAME, 2],
    [{ k: 'data', sid: 1, seq: 0, d: Buffer.alloc(1) }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'data', sid: 1, seq: 1, d: 'text' }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'credit', sid: 1, ack: 1 }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'resume', streams: [[1, 2]] }, ErrorCodes.MALFORMED_FRAME],
    [{ k: 'error', err: 'oops' }, ErrorCodes.MALFORMED_FRAME]
  ]
  for (const [value, code, id] of cases) {
    const p = parseFrame(value)
    assert.ok(p instanceof FrameProblem, `accepted ${JSON.stringify(value)}`)
    assert.is(p.code, code, JSON.stringify(value))
    assert.is(p.id, id, JSON.stringify(value))
  }
  // A key named like the problem marker cannot make a valid frame look refused, or the reverse.
  assert.not.ok(parseFrame({ k: 'ping', problem: true }) instanceof FrameProblem)
})

test('inconsistent options are refused at creation', () => {
  assert.is(transportDefaults.askTimeoutMs, 5000)
  try {
    resolveLinkOptions({ maxFrameBytes: 2048, maxMessageBytes: 1024 })
    assert.unreachable()
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT))
  }
  assert.is(resolveLinkOptions({ reconnect: { minDelayMs: 1 } }).reconnect.maxDelayMs, transportDefaults.reconnect.maxDelayMs)
})

test.run()
