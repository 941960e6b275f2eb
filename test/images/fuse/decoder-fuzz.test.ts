/**
 * The FUSE request decoder under random and mutated requests: the session's decoding and
 * dispatch (session.ts, structs.ts) and the file system's argument parsing (layer-fs.ts), fed
 * byte buffers as the reader threads hand them over from /dev/fuse. A seeded property test: the
 * same seed gives the same requests, so a failure names the seed and the request that broke it.
 *
 * Whatever the bytes (truncated, lengths past the buffer, bad opcodes, names without NUL, huge
 * offsets and sizes, flipped bytes), what must hold:
 *   - decoding never throws, and no handler throws (a RangeError from a read past the buffer
 *     would be reported as "handler threw");
 *   - every request with a readable header is answered exactly once (FORGET, BATCH_FORGET and
 *     INTERRUPT never), with a well-formed reply: its length, its id, 0 or a known negated errno;
 *   - the read callback is only asked for bytes inside the file;
 *   - answering one request never allocates more than a bounded amount of memory;
 *   - all of it synchronously or within a few turns of the event loop: never a hang.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { WarrenError } from '../../../src/errors.js'
import type { Channel, ChannelEvents } from '../../../src/images/fuse/channel.js'
import { FuseDefaults } from '../../../src/images/fuse/defaults.js'
import { LayerFileSystem } from '../../../src/images/fuse/layer-fs.js'
import { Errno, FUSE_MAJOR, FUSE_MINOR, FUSE_ROOT_ID, Op, opName, Size } from '../../../src/images/fuse/protocol.js'
import { FuseSession } from '../../../src/images/fuse/session.js'
import { parseInHeader } from '../../../src/images/fuse/structs.js'
import { timed, waitFor } from '../../support/index.js'
import { seededBytes } from './helpers.js'

const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8]
const REQUESTS_PER_SEED = 2000
/** More than any one reply needs (1 MiB READs, a directory of a few entries). */
const MAX_ALLOCATION_BYTES = 64 * 1024 * 1024

const FILES = [
  { name: 'empty.erofs', size: 0 },
  { name: 'one-page.erofs', size: 4096 },
  { name: 'layer.erofs', size: 1024 * 1024 + 7 }
]
const KNOWN_ERRNOS = new Set<number>(Object.values(Errno))
const NO_REPLY = new Set<number>([Op.FORGET, Op.BATCH_FORGET, Op.INTERRUPT])

/** Random choices from a seeded byte stream (the same seed, the same choices). */
class Choices {
  private at = 0
  private readonly pool: Buffer
  constructor (seed: number) { this.pool = seededBytes(1 << 20, seed) }
  u32 (): number {
    if (this.at + 4 > this.pool.length) this.at = 0
    const v = this.pool.readUInt32LE(this.at)
    this.at += 4
    return v
  }
  /** An integer in [0, n). */
  below (n: number): number { return this.u32() % n }
  pick<T> (items: readonly T[]): T { return items[this.below(items.length)]! }
  bytes (n: number): Buffer { return Buffer.from(Array.from({ length: n }, () => this.below(256))) }
}

/** A request as the kernel lays it out: the 40-byte header, then the body. */
function request (opcode: number, unique: bigint, nodeid: number, body: Buffer): Buffer {
  const b = Buffer.alloc(Size.IN_HEADER + body.length)
  b.writeUInt32LE(b.length, 0)
  b.writeUInt32LE(opcode, 4)
  b.writeBigUInt64LE(unique, 8)
  b.writeBigUInt64LE(BigInt(nodeid), 16)
  b.writeUInt32LE(1000, 24) // uid
  b.writeUInt32LE(1000, 28) // gid
  b.writeUInt32LE(4242, 32) // pid
  body.copy(b, Size.IN_HEADER)
  return b
}

/** Little-endian fields laid end to end: [bytes, value] pairs. */
function fields (...parts: Array<[4 | 8, number | bigint]>): Buffer {
  const b = Buffer.alloc(parts.reduce((n, [size]) => n + size, 0))
  let at = 0
  for (const [size, v] of parts) {
    if (size === 4) b.writeUInt32LE(Number(v) >>> 0, at)
    else b.writeBigUInt64LE(BigInt(v), at)
    at += size
  }
  return b
}

function initBody (major = FUSE_MAJOR, minor = FUSE_MINOR): Buffer {
  return Buffer.concat([fields([4, major], [4, minor], [4, 1 << 20], [4, 0x73fffffb]), Buffer.alloc(48)])
}

/** Numbers on the edges: zero, small, page sizes, the largest u32 and u64, past 2^53. */
const EDGE = [0, 1, 2, 3, 7, 4095, 4096, 4097, 1 << 20, 0x7fffffff, 0xffffffff] as const
const EDGE64 = [0n, 1n, 2n, 3n, 1n << 32n, (1n << 53n) + 1n, (1n << 64n) - 1n] as const

/** One valid request of a random kind; `uniques` are earlier ids, for INTERRUPT to name. */
function validRequest (c: Choices, unique: bigint, uniques: readonly bigint[]): Buffer {
  const node = (): number => c.pick([FUSE_ROOT_ID, FUSE_ROOT_ID, 2, 3, 4, 99, Number.MAX_SAFE_INTEGER])
  const fh = (): number | bigint => c.below(4) === 0 ? c.pick(EDGE64) : c.below(12)
  const num = (): number => c.below(3) === 0 ? c.pick(EDGE) : c.below(200_000)
  const name = (): Buffer => Buffer.from(c.pick([...FILES.map((f) => f.name), 'missing', 'x'.repeat(300), '', '.', '..']) + '\0')
  switch (c.below(20)) {
    case 0: return request(Op.LOOKUP, unique, FUSE_ROOT_ID, name())
    case 1: return request(Op.LOOKUP, unique, node(), name())
    case 2: return request(Op.GETATTR, unique, node(), fields([4, c.below(2)], [4, 0], [8, fh()]))
    case 3: return request(Op.OPEN, unique, node(), fields([4, c.pick([0, 1, 2, 0o100000])], [4, 0]))
    case 4: case 5: return request(Op.READ, unique, node(), fields([8, fh()], [8, c.below(2) ? num() : c.pick(EDGE64)], [4, num()], [4, 0], [8, 0], [4, 0], [4, 0]))
    case 6: return request(Op.RELEASE, unique, node(), fields([8, fh()], [4, 0], [4, 0], [8, 0]))
    case 7: return request(Op.OPENDIR, unique, node(), fields([4, 0], [4, 0]))
    case 8: case 9: return request(Op.READDIR, unique, FUSE_ROOT_ID, fields([8, fh()], [8, num()], [4, num()], [4, 0], [8, 0], [4, 0], [4, 0]))
    case 10: return request(Op.RELEASEDIR, unique, FUSE_ROOT_ID, fields([8, fh()], [4, 0], [4, 0], [8, 0]))
    case 11: return request(Op.STATFS, unique, FUSE_ROOT_ID, Buffer.alloc(0))
    case 12: return request(c.pick([Op.GETXATTR, Op.LISTXATTR]), unique, node(), Buffer.concat([fields([4, num()], [4, 0]), Buffer.from('user.x\0')]))
    case 13: return request(Op.ACCESS, unique, node(), fields([4, c.below(8)], [4, 0]))
    case 14: return request(Op.FORGET, unique, node(), fields([8, c.pick(EDGE64)]))
    case 15: {
      const count = c.pick([0, 1, 3, 0xffffffff])
      const records = Array.from({ length: c.below(4) }, () => fields([8, node()], [8, c.pick(EDGE64)]))
      return request(Op.BATCH_FORGET, unique, 0, Buffer.concat([fields([4, count], [4, 0]), ...records]))
    }
    case 16: return request(Op.INTERRUPT, unique | 1n, 0, fields([8, uniques.length > 0 && c.below(4) > 0 ? c.pick(uniques) : unique + 2n]))
    case 17: return request(Op.FLUSH, unique, node(), fields([8, fh()], [4, 0], [4, 0], [8, 0]))
    case 18: return request(c.pick([Op.INIT, Op.DESTROY]), unique, 0, initBody(c.pick([FUSE_MAJOR, FUSE_MAJOR, 6, 8]), c.pick([FUSE_MINOR, 27, 28, 45])))
    default: return request(c.pick([0, Op.SETATTR, Op.WRITE, Op.MKDIR, 48, 4096, 0xffffffff]), unique, node(), c.bytes(c.below(64)))
  }
}

/** A mutation of a valid request: the ways a buffer can be wrong. */
function mutate (c: Choices, buf: Buffer): Buffer {
  const b = Buffer.from(buf)
  switch (c.below(8)) {
    case 0: return b.subarray(0, c.below(b.length)) // truncated (the header's len now lies)
    case 1: b.writeUInt32LE(c.pick([0, 1, 39, 40, b.length + 1, 0xffffffff]), 0); return b // len that does not match
    case 2: b.writeUInt32LE(c.u32(), 4); return b // any opcode
    case 3: { // a name without its NUL, and no byte after it
      for (let i = Size.IN_HEADER; i < b.length; i++) if (b[i] === 0) b[i] = 0x61
      return b
    }
    case 4: { // flipped bytes in the body
      for (let k = 0; k < 4 && b.length > Size.IN_HEADER; k++) b[Size.IN_HEADER + c.below(b.length - Size.IN_HEADER)] = c.below(256)
      return b
    }
    case 5: { // body cut short with the header's len following it
      const cut = b.subarray(0, Size.IN_HEADER + c.below(Math.max(1, b.length - Size.IN_HEADER)))
      if (cut.length >= 4) cut.writeUInt32LE(cut.length, 0)
      return cut
    }
    case 6: { // junk after the request, len unchanged (the reader's buffer is larger)
      return Buffer.concat([b, c.bytes(c.below(128))])
    }
    default: return c.bytes(c.below(96)) // noise
  }
}

/** An in-memory stand-in for /dev/fuse: requests are handed in, replies kept. */
class MemoryChannel implements Channel {
  readonly fd = -1
  readonly ended = false
  readonly replies: Buffer[] = []
  private events: ChannelEvents | undefined
  start (_readers: number, _bufferBytes: number, events: ChannelEvents): void { this.events = events }
  write (parts: readonly Uint8Array[]): string | undefined {
    this.replies.push(Buffer.concat(parts))
    return undefined
  }
  closeUnstarted (): void {}
  deliver (buf: Buffer): void { this.events!.request(buf) }
}

interface Violation { seed: number, index: number, request: string, problem: string }

/** Serves one seed's requests; returns every property that failed (empty: all held). */
async function runSeed (seed: number): Promise<Violation[]> {
  const c = new Choices(seed)
  const violations: Violation[] = []
  const channel = new MemoryChannel()
  let current = { index: -1, hex: '' }
  const violated = (problem: string): void => { violations.push({ seed, index: current.index, request: current.hex, problem }) }
  const sizes = new Map(FILES.map((f) => [f.name, f.size]))
  const fs = new LayerFileSystem({
    files: FILES,
    read: async (name, offset, length) => {
      const size = sizes.get(name) ?? -1
      if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length <= 0 || offset + length > size) {
        violated(`read callback asked for ${name} [${offset}, +${length}) of a ${size}-byte file`)
      }
      return Buffer.alloc(Math.max(0, Math.min(length, size - offset)))
    },
    tunables: FuseDefaults,
    report: (err: WarrenError) => { violated(`the file system reported ${err.code}: ${err.message}`) }
  })
  const session = new FuseSession(channel, fs, {
    init: { maxWrite: FuseDefaults.maxWrite, maxPages: FuseDefaults.maxPages, maxReadahead: FuseDefaults.maxReadahead, maxBackground: 64, congestionThreshold: 48 },
    interruptMemoryMs: FuseDefaults.interruptMemoryMs,
    interruptPollMs: FuseDefaults.interruptPollMs,
    onError: (err) => {
      // Reported protocol trouble is a clean answer; a handler that threw or failed is not.
      if (/handler (threw|failed)/.test(err.message)) violated(`${err.code}: ${err.message}`)
    }
  })
  session.start(1, 1 << 20)

  /** What was sent, by id: how many replies each wants. */
  const expected = new Map<bigint, { want: number, op: string }>()
  const uniques: bigint[] = []
  const send = (buf: Buffer, index: number): void => {
    current = { index, hex: buf.subarray(0, 128).toString('hex') }
    const h = parseInHeader(buf)
    if (h !== undefined && !expected.has(h.unique)) expected.set(h.unique, { want: NO_REPLY.has(h.opcode) ? 0 : 1, op: opName(h.opcode) })
    else if (h !== undefined) expected.set(h.unique, { want: Number.NaN, op: 'duplicate id' }) // not counted
    const before = process.memoryUsage().arrayBuffers
    try {
      channel.deliver(buf)
    } catch (err) {
      violated(`decoding threw ${(err as Error).name}: ${(err as Error).message}`)
    }
    const grew = process.memoryUsage().arrayBuffers - before
    if (grew > MAX_ALLOCATION_BYTES) violated(`answering it allocated ${Math.round(grew / 2 ** 20)} MiB`)
  }

  send(request(Op.INIT, 2n, 0, initBody()), -1)
  for (let i = 0; i < REQUESTS_PER_SEED; i++) {
    const unique = BigInt(i + 2) * 2n + 2n // even: the low bit marks interrupts
    let buf = validRequest(c, unique, uniques)
    if (c.below(2) === 0) {
      buf = mutate(c, buf)
      // Keep ids distinct, so replies can be counted per request.
      if (buf.length >= 16) buf.writeBigUInt64LE((buf.readUInt32LE(4) === Op.INTERRUPT ? unique | 1n : unique), 8)
    }
    uniques.push(unique)
    send(buf, i)
  }
  await waitFor(() => session.stats().inFlight === 0, 10_000, 'every READ to be answered')

  const got = new Map<bigint, number>()
  for (const r of channel.replies) {
    current = { index: -2, hex: r.subarray(0, 32).toString('hex') }
    if (r.length < Size.OUT_HEADER || r.readUInt32LE(0) !== r.length) { violated(`reply of ${r.length} bytes says ${r.length >= 4 ? r.readUInt32LE(0) : '?'}`); continue }
    const error = r.readInt32LE(4)
    if (error > 0 || (error < 0 && !KNOWN_ERRNOS.has(-error))) violated(`reply error ${error} is not 0 or a negated errno`)
    if (error !== 0 && r.length !== Size.OUT_HEADER) violated('an error reply carries a body')
    const unique = r.readBigUInt64LE(8)
    got.set(unique, (got.get(unique) ?? 0) + 1)
  }
  for (const [unique, { want, op }] of expected) {
    const n = got.get(unique) ?? 0
    if (!Number.isNaN(want) && n !== want) violations.push({ seed, index: -3, request: `id ${unique} (${op})`, problem: `${n} replies, not ${want}` })
  }
  for (const unique of got.keys()) {
    if (!expected.has(unique)) violations.push({ seed, index: -3, request: `id ${unique}`, problem: 'a reply to a request never sent' })
  }
  return violations
}

test(`random and mutated FUSE requests (${SEEDS.length} seeds x ${REQUESTS_PER_SEED}) decode cleanly and are answered exactly once`, timed(120_000, async () => {
  const violations: Violation[] = []
  for (const seed of SEEDS) violations.push(...await runSeed(seed))
  assert.equal(violations.slice(0, 10), [], `${violations.length} violations, the first ones above`)
}))

test('a READDIR asking for 4 GiB allocates what its entries take, and lists them all', () => {
  const fs = new LayerFileSystem({ files: FILES, read: async () => Buffer.alloc(0), tunables: FuseDefaults, report: () => undefined })
  const call = (opcode: number, body: Buffer): readonly Uint8Array[] => {
    const buf = request(opcode, 2n, FUSE_ROOT_ID, body)
    const reply = fs.handlers.get(opcode)!({ header: parseInHeader(buf)!, body: buf.subarray(Size.IN_HEADER), signal: new AbortController().signal })
    assert.ok(Array.isArray(reply), `${opName(opcode)} answered ${String(reply)}`)
    return reply as readonly Uint8Array[]
  }
  const fh = Buffer.from(call(Op.OPENDIR, fields([4, 0], [4, 0]))[0]!).readBigUInt64LE(0)
  const before = process.memoryUsage().arrayBuffers
  const [out] = call(Op.READDIR, fields([8, fh], [8, 0], [4, 0xffffffff], [4, 0], [8, 0], [4, 0], [4, 0]))
  assert.ok(process.memoryUsage().arrayBuffers - before < MAX_ALLOCATION_BYTES)
  const names: string[] = []
  const b = Buffer.from(out!)
  for (let at = 0; at < b.length; at += (24 + b.readUInt32LE(at + 16) + 7) & ~7) names.push(b.toString('utf8', at + 24, at + 24 + b.readUInt32LE(at + 16)))
  assert.equal(names, ['.', '..', ...FILES.map((f) => f.name)])
})

test.run()
