// The seed corpus of the agent's fuzz targets: one small valid input per thing the target
// understands, so the fuzzer starts from real requests and mutates from there. Built, not
// checked in, so it follows the protocol as the code does (msgpackr, as the node encodes).
import { Packr } from 'msgpackr'

const packr = new Packr({ useRecords: false })

/** One frame as the node sends it: a 4-byte big-endian length, then the msgpack body. */
function frame (body) {
  const b = Buffer.isBuffer(body) ? body : packr.pack(body)
  const len = Buffer.alloc(4)
  len.writeUInt32BE(b.length)
  return Buffer.concat([len, b])
}

/** A request stream for fuzz_request: the chunking byte (0 = one read), then the frames. */
function stream (chunk, ...bodies) {
  return Buffer.concat([Buffer.from([chunk]), ...bodies.map(frame)])
}

const data = Buffer.from('hello\n')

/** Every request kind with its fields, a few in their odd but valid forms. */
const requests = {
  ping: { t: 'ping', id: 1 },
  exec: { t: 'exec', id: 2, argv: ['/bin/sh', '-c', 'echo hi'], cwd: '/tmp', env: { PATH: '/bin', HOME: '/root', A: '' }, uid: 1000, gid: 1000, stdin: data, timeoutMs: 5000, maxOutputBytes: 1 << 20 },
  execStream: { t: 'exec', id: 3, argv: ['cat'], stdinStream: true },
  stdin: { t: 'stdin', id: 3, data, eof: true },
  kill: { t: 'kill', id: 4, exec: 3, signal: 15 },
  execPty: { t: 'exec', id: 14, argv: ['sh'], stdinStream: true, pty: true, cols: 120, rows: 40 },
  resize: { t: 'resize', id: 15, exec: 14, cols: 100, rows: 30 },
  read: { t: 'read', id: 5, path: '/etc/hostname', offset: 0, length: 4096 },
  write: { t: 'write', id: 6, path: '/tmp/a/b', data, mode: 0o644, append: false, mkdirs: true },
  list: { t: 'list', id: 7, path: '/' },
  stat: { t: 'stat', id: 8, path: '/bin/sh', follow: true },
  remove: { t: 'remove', id: 9, path: '/tmp/a', recursive: true },
  hostname: { t: 'hostname', id: 10, name: 'sb-1.example' },
  writeAt: { t: 'write', id: 14, path: '/tmp/a/c', data, offset: 1 << 20 },
  mkdir: { t: 'mkdir', id: 15, path: '/tmp/a/d/e', mode: 0o750, parents: true },
  rename: { t: 'rename', id: 16, path: '/tmp/a/c', to: '/tmp/a/d/f' },
  symlink: { t: 'symlink', id: 17, path: '/tmp/a/l', target: '../../etc/passwd', mkdirs: false },
  nilFields: { t: 'read', id: 11, path: '/x', offset: null, length: null, extra: [1, { a: null }] },
  floatId: { t: 'ping', id: 12.0, big: 2 ** 40, neg: -5 },
  unknownKind: { t: 'frobnicate', id: 13 },
  execRetain: { t: 'exec', id: 18, argv: ['yes'], retain: true, tag: 'job-1', window: 65536 },
  execs: { t: 'execs', id: 19 },
  attach: { t: 'attach', id: 18, seq: 0, window: 65536 },
  ack: { t: 'ack', id: 18, seq: 3 }
}

/** The seeds of each target, by file name. */
export function seedInputs (target) {
  const out = new Map()
  if (target === 'request') {
    for (const [name, body] of Object.entries(requests)) out.set(name, stream(0, body))
    out.set('all-in-one-read', stream(0, ...Object.values(requests)))
    out.set('all-byte-by-byte', stream(1, ...Object.values(requests)))
    out.set('all-in-7-byte-reads', stream(7, ...Object.values(requests)))
    out.set('not-a-map', stream(0, packr.pack([1, 2, 3])))
    out.set('empty-frame', Buffer.from([0, 0, 0, 0, 0]))
    out.set('too-large', Buffer.from([0, 0xff, 0xff, 0xff, 0xff]))
    return out
  }
  if (target === 'mp') {
    for (const [name, body] of Object.entries(requests)) out.set(name, packr.pack(body))
    const values = [null, true, false, 0, 127, 128, 255, 256, 65535, 65536, 2 ** 32, 2 ** 53 - 1, -1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31) - 1, 1.5, 2.0, '', 'a'.repeat(31), 'a'.repeat(32), 'a'.repeat(256), Buffer.alloc(0), Buffer.alloc(300), [], new Array(16).fill(0), {}]
    out.set('scalars', Buffer.concat(values.map((v) => packr.pack(v))))
    out.set('nested', packr.pack([[[[[{ a: [[[]]] }]]]]]))
    out.set('extensions', Buffer.from([0xd4, 1, 0, 0xd5, 1, 0, 0, 0xc7, 2, 1, 0, 0, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]))
    return out
  }
  throw new Error(`no seeds for fuzz target ${target}`)
}
