import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Errno, Op, opName, S_IFREG, Size } from '../../../src/images/fuse/protocol.js'
import {
  attrOut, direntSize, entryOut, initOut, openOut, outHeader, parseBatchForget, parseInHeader, parseInitIn, parseName,
  parseReadIn, statfsOut, validity, writeDirent, type Attr
} from '../../../src/images/fuse/structs.js'

const attr: Attr = { ino: 7, size: 5000, mode: S_IFREG | 0o444, nlink: 1, uid: 10, gid: 20, mtimeMs: 1_500, blksize: 4096 }

test('reply structs have the kernel sizes', () => {
  assert.is(outHeader(0, 0, 1n).length, Size.OUT_HEADER)
  assert.is(entryOut(1, 0, validity(1), validity(1), attr).length, 128)
  assert.is(attrOut(validity(1), attr).length, 104)
  assert.is(openOut(1, 0).length, 16)
  assert.is(initOut({ major: 7, minor: 38, maxReadahead: 0, flags: 0, maxBackground: 0, congestionThreshold: 0, maxWrite: 0, timeGran: 0, maxPages: 0 }).length, 64)
  assert.is(statfsOut({ blocks: 1, files: 1, bsize: 4096, namelen: 255 }).length, 80)
})

test('out header: length includes itself, error is a negated errno, unique round-trips', () => {
  const h = outHeader(100, -Errno.ENOENT, 0xfedcba9876543210n)
  assert.is(h.readUInt32LE(0), 116)
  assert.is(h.readInt32LE(4), -2)
  assert.is(h.readBigUInt64LE(8), 0xfedcba9876543210n)
})

test('entry_out puts the attr at byte 40 with the fuse_attr field offsets', () => {
  const b = entryOut(42, 3, { sec: 60, nsec: 5 }, { sec: 3600, nsec: 6 }, attr)
  assert.is(b.readBigUInt64LE(0), 42n) // nodeid
  assert.is(b.readBigUInt64LE(8), 3n) // generation
  assert.is(b.readBigUInt64LE(16), 60n) // entry_valid
  assert.is(b.readBigUInt64LE(24), 3600n) // attr_valid
  assert.is(b.readUInt32LE(32), 5)
  assert.is(b.readUInt32LE(36), 6)
  const a = 40
  assert.is(b.readBigUInt64LE(a), 7n) // ino
  assert.is(b.readBigUInt64LE(a + 8), 5000n) // size
  assert.is(b.readBigUInt64LE(a + 16), 10n) // blocks of 512
  assert.is(b.readBigUInt64LE(a + 32), 1n) // mtime seconds
  assert.is(b.readUInt32LE(a + 52), 500_000_000) // mtime ns
  assert.is(b.readUInt32LE(a + 60), S_IFREG | 0o444) // mode
  assert.is(b.readUInt32LE(a + 64), 1) // nlink
  assert.is(b.readUInt32LE(a + 68), 10) // uid
  assert.is(b.readUInt32LE(a + 72), 20) // gid
  assert.is(b.readUInt32LE(a + 80), 4096) // blksize
})

test('init_out fields sit where the kernel reads them', () => {
  const b = initOut({ major: 7, minor: 38, maxReadahead: 1 << 20, flags: 0x80000001, maxBackground: 64, congestionThreshold: 48, maxWrite: 131072, timeGran: 1, maxPages: 256 })
  assert.equal([b.readUInt32LE(0), b.readUInt32LE(4), b.readUInt32LE(8), b.readUInt32LE(12)], [7, 38, 1 << 20, 0x80000001])
  assert.equal([b.readUInt16LE(16), b.readUInt16LE(18), b.readUInt32LE(20), b.readUInt32LE(24), b.readUInt16LE(28)], [64, 48, 131072, 1, 256])
})

test('request parsing: header, INIT (old 16-byte and new 64-byte forms), READ, names, BATCH_FORGET', () => {
  const req = Buffer.alloc(Size.IN_HEADER + Size.READ_IN)
  req.writeUInt32LE(req.length, 0)
  req.writeUInt32LE(Op.READ, 4)
  req.writeBigUInt64LE(99n, 8)
  req.writeBigUInt64LE(5n, 16)
  req.writeUInt32LE(1000, 24)
  const h = parseInHeader(req)
  assert.equal(h, { len: 80, opcode: Op.READ, unique: 99n, nodeid: 5, uid: 1000, gid: 0, pid: 0 })
  assert.is(parseInHeader(req.subarray(0, 39)), undefined)
  const bad = Buffer.from(req)
  bad.writeUInt32LE(500, 0) // longer than what was read
  assert.is(parseInHeader(bad), undefined)

  const body = req.subarray(Size.IN_HEADER)
  body.writeBigUInt64LE(3n, 0)
  body.writeBigUInt64LE(1n << 40n, 8)
  body.writeUInt32LE(131072, 16)
  assert.equal(parseReadIn(body), { fh: 3, offset: 2 ** 40, size: 131072 })

  const init = Buffer.alloc(64)
  init.writeUInt32LE(7, 0); init.writeUInt32LE(45, 4); init.writeUInt32LE(131072, 8); init.writeUInt32LE(0x73fffffb, 12)
  assert.equal(parseInitIn(init), { major: 7, minor: 45, maxReadahead: 131072, flags: 0x73fffffb })
  assert.equal(parseInitIn(init.subarray(0, 16)), parseInitIn(init))
  assert.is(parseInitIn(init.subarray(0, 8)), undefined)

  assert.is(parseName(Buffer.from('layer.erofs\0junk')), 'layer.erofs')
  assert.is(parseName(Buffer.from('unterminated')), undefined)

  const forget = Buffer.alloc(8 + 2 * 16)
  forget.writeUInt32LE(2, 0)
  forget.writeBigUInt64LE(5n, 8); forget.writeBigUInt64LE(1n, 16)
  forget.writeBigUInt64LE(6n, 24); forget.writeBigUInt64LE(3n, 32)
  assert.equal(parseBatchForget(forget), [{ nodeid: 5, nlookup: 1 }, { nodeid: 6, nlookup: 3 }])
  assert.equal(parseBatchForget(forget.subarray(0, 24)), [{ nodeid: 5, nlookup: 1 }], 'a truncated record is not read')
})

test('dirents are padded to 8 bytes and carry the resume offset', () => {
  assert.is(direntSize(1), 32)
  assert.is(direntSize(8), 32)
  assert.is(direntSize(9), 40)
  const b = Buffer.alloc(64, 0xff)
  const n = writeDirent(b, 0, 12, 3, 8, Buffer.from('abcde'))
  assert.is(n, 32)
  assert.equal([b.readBigUInt64LE(0), b.readBigUInt64LE(8), b.readUInt32LE(16), b.readUInt32LE(20)], [12n, 3n, 5, 8])
  assert.is(b.toString('utf8', 24, 29), 'abcde')
  assert.ok(b.subarray(29, 32).every((x) => x === 0), 'padding is zeroed')
  assert.is(b[32], 0xff, 'nothing written past the record')
})

test('validity splits seconds into sec and nsec; opcode names', () => {
  assert.equal(validity(1.5), { sec: 1, nsec: 500_000_000 })
  assert.equal(validity(-3), { sec: 0, nsec: 0 })
  assert.is(opName(Op.READDIR), 'READDIR')
  assert.is(opName(4242), 'OP_4242')
})

test.run()
