/**
 * Reading and writing the kernel's FUSE structs. Everything is little-endian with natural
 * alignment (the kernel pads every struct to 64 bits so 32- and 64-bit servers agree); offsets
 * below are those of include/uapi/linux/fuse.h at protocol 7.38. u64 values the kernel chose
 * (request ids) stay bigint; u64 values that are ours or are file offsets become numbers, which
 * is exact up to 2^53 bytes, far beyond any layer.
 */
import { Size } from './protocol.js'

/** `struct fuse_in_header`: the first 40 bytes of every request. */
export interface InHeader {
  /** Length of the whole request, header included. */
  len: number
  opcode: number
  /** Request id; the reply carries it back. */
  unique: bigint
  /** The inode the request is about (0 for INIT and the like). */
  nodeid: number
  uid: number
  gid: number
  pid: number
}

/** Parses a request's header; `undefined` when the bytes are too short or inconsistent. */
export function parseInHeader (buf: Buffer): InHeader | undefined {
  if (buf.length < Size.IN_HEADER) return undefined
  const len = buf.readUInt32LE(0)
  if (len < Size.IN_HEADER || len > buf.length) return undefined
  return {
    len,
    opcode: buf.readUInt32LE(4),
    unique: buf.readBigUInt64LE(8),
    nodeid: u64(buf, 16),
    uid: buf.readUInt32LE(24),
    gid: buf.readUInt32LE(28),
    pid: buf.readUInt32LE(32)
    // 36: total_extlen (7.37+) and padding; extensions follow the fixed arguments and are unused.
  }
}

/** `struct fuse_out_header`: 16 bytes before every reply. `error` is 0 or a negated errno. */
export function outHeader (bodyBytes: number, error: number, unique: bigint): Buffer {
  const b = Buffer.alloc(Size.OUT_HEADER)
  b.writeUInt32LE(Size.OUT_HEADER + bodyBytes, 0)
  b.writeInt32LE(error, 4)
  b.writeBigUInt64LE(unique, 8)
  return b
}

/** A u64 field as a number; values above 2^53 (never ours) saturate instead of losing bits silently. */
function u64 (buf: Buffer, at: number): number {
  const v = buf.readBigUInt64LE(at)
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v)
}

/** What `struct fuse_attr` says about an inode. */
export interface Attr {
  ino: number
  size: number
  /** Type and permission bits. */
  mode: number
  nlink: number
  uid: number
  gid: number
  /** atime, mtime and ctime alike: layers are immutable, one timestamp is all they have. */
  mtimeMs: number
  blksize: number
}

/** A cache lifetime as the kernel takes it: whole seconds plus nanoseconds. */
export interface Validity {
  sec: number
  nsec: number
}

/** Converts seconds (fractions allowed) to a `Validity`. */
export function validity (seconds: number): Validity {
  const s = Math.max(0, seconds)
  const sec = Math.floor(s)
  return { sec, nsec: Math.min(999_999_999, Math.round((s - sec) * 1e9)) }
}

/** Writes the 88-byte `struct fuse_attr` at `at`. */
function writeAttr (b: Buffer, at: number, a: Attr): void {
  const ms = Math.max(0, a.mtimeMs)
  const sec = BigInt(Math.floor(ms / 1000))
  const nsec = Math.min(999_999_999, Math.round((ms % 1000) * 1e6))
  b.writeBigUInt64LE(BigInt(a.ino), at)
  b.writeBigUInt64LE(BigInt(a.size), at + 8)
  b.writeBigUInt64LE(BigInt(Math.ceil(a.size / 512)), at + 16) // st_blocks counts 512-byte units
  b.writeBigUInt64LE(sec, at + 24) // atime
  b.writeBigUInt64LE(sec, at + 32) // mtime
  b.writeBigUInt64LE(sec, at + 40) // ctime
  b.writeUInt32LE(nsec, at + 48)
  b.writeUInt32LE(nsec, at + 52)
  b.writeUInt32LE(nsec, at + 56)
  b.writeUInt32LE(a.mode, at + 60)
  b.writeUInt32LE(a.nlink, at + 64)
  b.writeUInt32LE(a.uid, at + 68)
  b.writeUInt32LE(a.gid, at + 72)
  b.writeUInt32LE(0, at + 76) // rdev
  b.writeUInt32LE(a.blksize, at + 80)
  b.writeUInt32LE(0, at + 84) // flags (submount, DAX): none
}

/** `struct fuse_entry_out` (128 bytes): the answer to LOOKUP. */
export function entryOut (nodeid: number, generation: number, entry: Validity, attrValid: Validity, attr: Attr): Buffer {
  const b = Buffer.alloc(Size.ENTRY_OUT)
  b.writeBigUInt64LE(BigInt(nodeid), 0)
  b.writeBigUInt64LE(BigInt(generation), 8)
  b.writeBigUInt64LE(BigInt(entry.sec), 16)
  b.writeBigUInt64LE(BigInt(attrValid.sec), 24)
  b.writeUInt32LE(entry.nsec, 32)
  b.writeUInt32LE(attrValid.nsec, 36)
  writeAttr(b, 40, attr)
  return b
}

/** `struct fuse_attr_out` (104 bytes): the answer to GETATTR. */
export function attrOut (attrValid: Validity, attr: Attr): Buffer {
  const b = Buffer.alloc(Size.ATTR_OUT)
  b.writeBigUInt64LE(BigInt(attrValid.sec), 0)
  b.writeUInt32LE(attrValid.nsec, 8)
  writeAttr(b, 16, attr)
  return b
}

/** `struct fuse_open_out` (16 bytes): the answer to OPEN and OPENDIR. */
export function openOut (fh: number, openFlags: number): Buffer {
  const b = Buffer.alloc(Size.OPEN_OUT)
  b.writeBigUInt64LE(BigInt(fh), 0)
  b.writeUInt32LE(openFlags, 8)
  return b
}

/** `struct fuse_init_in`, the fields this code reads. */
export interface InitIn {
  major: number
  minor: number
  maxReadahead: number
  flags: number
}

/** Parses INIT's argument; the kernel sends 16 bytes before 7.36 and 64 after. */
export function parseInitIn (body: Buffer): InitIn | undefined {
  if (body.length < Size.INIT_IN_MIN) return undefined
  return { major: body.readUInt32LE(0), minor: body.readUInt32LE(4), maxReadahead: body.readUInt32LE(8), flags: body.readUInt32LE(12) }
}

/** `struct fuse_init_out`: what we tell the kernel about ourselves. */
export interface InitOut {
  major: number
  minor: number
  maxReadahead: number
  flags: number
  maxBackground: number
  congestionThreshold: number
  maxWrite: number
  /** Timestamp granularity in ns. */
  timeGran: number
  maxPages: number
}

/** Encodes `struct fuse_init_out` (64 bytes; flags2 and the rest zero). */
export function initOut (o: InitOut): Buffer {
  const b = Buffer.alloc(Size.INIT_OUT)
  b.writeUInt32LE(o.major, 0)
  b.writeUInt32LE(o.minor, 4)
  b.writeUInt32LE(o.maxReadahead, 8)
  b.writeUInt32LE(o.flags >>> 0, 12)
  b.writeUInt16LE(o.maxBackground, 16)
  b.writeUInt16LE(o.congestionThreshold, 18)
  b.writeUInt32LE(o.maxWrite, 20)
  b.writeUInt32LE(o.timeGran, 24)
  b.writeUInt16LE(o.maxPages, 28)
  // 30: map_alignment (DAX only), 32: flags2, 36..63: unused
  return b
}

/** What STATFS reports. */
export interface StatFs {
  blocks: number
  files: number
  bsize: number
  namelen: number
}

/** `struct fuse_statfs_out` (80 bytes). Nothing is free on a read-only file system. */
export function statfsOut (s: StatFs): Buffer {
  const b = Buffer.alloc(Size.KSTATFS)
  b.writeBigUInt64LE(BigInt(s.blocks), 0)
  // 8: bfree, 16: bavail stay 0
  b.writeBigUInt64LE(BigInt(s.files), 24)
  // 32: ffree stays 0
  b.writeUInt32LE(s.bsize, 40)
  b.writeUInt32LE(s.namelen, 44)
  b.writeUInt32LE(s.bsize, 48) // frsize
  return b
}

/** `struct fuse_getxattr_out` (8 bytes): the size a GETXATTR/LISTXATTR with size 0 asks for. */
export function getxattrOut (size: number): Buffer {
  const b = Buffer.alloc(Size.GETXATTR_OUT)
  b.writeUInt32LE(size, 0)
  return b
}

/** Bytes one `struct fuse_dirent` with this name takes, padded to 8. */
export function direntSize (nameBytes: number): number {
  return (Size.DIRENT_HEADER + nameBytes + 7) & ~7
}

/**
 * Writes one `struct fuse_dirent` at `at` (the caller checked it fits).
 * @param off the cookie the kernel passes back to continue after this entry
 * @returns the bytes written, padding included
 */
export function writeDirent (b: Buffer, at: number, ino: number, off: number, type: number, name: Buffer): number {
  b.writeBigUInt64LE(BigInt(ino), at)
  b.writeBigUInt64LE(BigInt(off), at + 8)
  b.writeUInt32LE(name.length, at + 16)
  b.writeUInt32LE(type, at + 20)
  name.copy(b, at + Size.DIRENT_HEADER)
  const size = direntSize(name.length)
  b.fill(0, at + Size.DIRENT_HEADER + name.length, at + size)
  return size
}

/** `struct fuse_read_in`: the READ and READDIR argument. */
export interface ReadIn {
  fh: number
  offset: number
  size: number
}

export function parseReadIn (body: Buffer): ReadIn | undefined {
  if (body.length < 24) return undefined // fh, offset, size, read_flags: the part every minor has
  return { fh: u64(body, 0), offset: u64(body, 8), size: body.readUInt32LE(16) }
}

/** `struct fuse_open_in`: `flags` are the open(2) flags. */
export function parseOpenIn (body: Buffer): { flags: number } | undefined {
  if (body.length < 8) return undefined
  return { flags: body.readUInt32LE(0) }
}

/** `struct fuse_release_in` (RELEASE, RELEASEDIR): the handle to drop. */
export function parseReleaseIn (body: Buffer): { fh: number } | undefined {
  if (body.length < 16) return undefined
  return { fh: u64(body, 0) }
}

/** `struct fuse_getattr_in`: a handle, when `GETATTR_FH` is set. */
export function parseGetattrIn (body: Buffer): { flags: number, fh: number } | undefined {
  if (body.length < 16) return { flags: 0, fh: 0 } // before 7.9 GETATTR had no argument
  return { flags: body.readUInt32LE(0), fh: u64(body, 8) }
}

/** `struct fuse_getxattr_in` (GETXATTR, LISTXATTR): the caller's buffer size. */
export function parseGetxattrIn (body: Buffer): { size: number } | undefined {
  if (body.length < 8) return undefined
  return { size: body.readUInt32LE(0) }
}

/** `struct fuse_access_in`: the access(2) mask. */
export function parseAccessIn (body: Buffer): { mask: number } | undefined {
  if (body.length < 8) return undefined
  return { mask: body.readUInt32LE(0) }
}

/** `struct fuse_forget_in`: how many lookups the kernel drops. */
export function parseForgetIn (body: Buffer): { nlookup: number } | undefined {
  if (body.length < 8) return undefined
  return { nlookup: u64(body, 0) }
}

/** `struct fuse_batch_forget_in` and the `fuse_forget_one` records after it. */
export function parseBatchForget (body: Buffer): Array<{ nodeid: number, nlookup: number }> {
  if (body.length < 8) return []
  const count = body.readUInt32LE(0)
  const out: Array<{ nodeid: number, nlookup: number }> = []
  for (let i = 0, at = 8; i < count && at + Size.FORGET_ONE <= body.length; i++, at += Size.FORGET_ONE) {
    out.push({ nodeid: u64(body, at), nlookup: u64(body, at + 8) })
  }
  return out
}

/** `struct fuse_interrupt_in`: the id of the request to interrupt. */
export function parseInterruptIn (body: Buffer): { unique: bigint } | undefined {
  if (body.length < 8) return undefined
  return { unique: body.readBigUInt64LE(0) }
}

/** A NUL-terminated name (LOOKUP's argument); `undefined` without the terminator. */
export function parseName (body: Buffer): string | undefined {
  const end = body.indexOf(0)
  if (end < 0) return undefined
  return body.toString('utf8', 0, end)
}
