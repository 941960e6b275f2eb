/**
 * The tar a tree travels as, both ways (downloads packed on the node, uploads packed by the
 * SDK): directories, regular files and symlinks, each a ustar header (then the file's bytes,
 * padded to 512), and two zero blocks at the end. Written here, block by block, so a member's
 * name is exactly its bytes whatever they are (see file-names.ts); read with tar-stream.
 *
 * A name or link target that ustar cannot hold as it is (longer than 100 bytes, or not UTF-8)
 * goes in a pax header before its member: `path`/`linkpath`, which GNU tar and Python's tarfile
 * read exactly (raw bytes under `hdrcharset=BINARY` for one that is not UTF-8), and, for one
 * that is not UTF-8, warren's own `WARREN.path`/`WARREN.linkpath` (base64), because tar-stream
 * decodes pax values as UTF-8 and would lose its bytes.
 */
import type { Header } from 'tar-stream'
import { isUtf8Name, nameFromBytes, nameToBytes } from '../../file-names.js'

const BLOCK = 512

/** One member of a tree's tar, before its bytes. */
export interface TarMember {
  /** Its path below the tree's root, `/`-separated (escaped where not UTF-8). */
  name: string
  type: 'file' | 'directory' | 'symlink'
  mode: number
  mtimeMs: number
  /** A file's size in bytes (its bytes follow the header, then `tarPadding(size)`). */
  size?: number
  /** A symlink's target, as stored. */
  linkname?: string
}

/** Two zero blocks: the end of the archive. */
export const TAR_END = Buffer.alloc(2 * BLOCK)

/** The zero bytes after a member's `size` bytes, up to the next block. */
export function tarPadding (size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK)
}

/** `value` as `width - 1` octal digits and a NUL. */
function octal (block: Buffer, offset: number, width: number, value: number): void {
  block.write(Math.max(0, Math.floor(value)).toString(8).padStart(width - 1, '0').slice(-(width - 1)) + '\0', offset, width, 'latin1')
}

function ustar (name: Buffer, flag: string, size: number, mode: number, mtimeMs: number, linkname?: Buffer): Buffer {
  const block = Buffer.alloc(BLOCK)
  name.copy(block, 0, 0, 100)
  octal(block, 100, 8, mode & 0o7777)
  octal(block, 108, 8, 0) // uid and gid: a sandbox's owners mean nothing on the other side
  octal(block, 116, 8, 0)
  octal(block, 124, 12, size)
  octal(block, 136, 12, mtimeMs / 1000)
  block.write(flag, 156, 1, 'latin1')
  linkname?.copy(block, 157, 0, 100)
  block.write('ustar\u000000', 257, 8, 'latin1')
  block.fill(0x20, 148, 156) // the checksum counts its own field as spaces
  let sum = 0
  for (const b of block) sum += b
  block.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'latin1')
  return block
}

/** One pax record: its length (of the whole record, its own digits included), ` key=value\n`. */
function paxRecord (key: string, value: Buffer): Buffer {
  const rest = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')])
  let length = rest.length + 1
  while (String(length).length + rest.length !== length) length = String(length).length + rest.length
  return Buffer.concat([Buffer.from(String(length)), rest])
}

/** A field ustar holds as it is: UTF-8, at most 100 bytes, no NUL. */
const fitsUstar = (text: string, bytes: Buffer): boolean => isUtf8Name(text) && bytes.length <= 100

/** The header blocks of `m`: a pax header first when its name or target needs one, then its ustar header. */
export function tarHeader (m: TarMember): Buffer {
  const name = nameToBytes(m.type === 'directory' && !m.name.endsWith('/') ? `${m.name}/` : m.name, 'name')
  const link = m.linkname === undefined ? undefined : nameToBytes(m.linkname, 'linkname')
  const flag = m.type === 'file' ? '0' : m.type === 'directory' ? '5' : '2'
  const size = m.type === 'file' ? m.size ?? 0 : 0
  const records: Buffer[] = []
  // Where a field does not fit, the pax record holds it and the ustar field a placeholder.
  const field = (text: string, bytes: Buffer, key: 'path' | 'linkpath'): Buffer => {
    if (fitsUstar(text, bytes)) return bytes
    records.push(paxRecord(key, bytes))
    if (!isUtf8Name(text)) records.push(paxRecord(`WARREN.${key}`, Buffer.from(bytes.toString('base64'))))
    return Buffer.from('warren-pax-name')
  }
  // 11 octal digits hold sizes below 8 GiB; a larger one goes in the pax header (the ustar field then 0).
  const fitsSize = size < 8 * 2 ** 30
  if (!fitsSize) records.push(paxRecord('size', Buffer.from(String(size))))
  const header = ustar(field(m.name, name, 'path'), flag, fitsSize ? size : 0, m.mode, m.mtimeMs, link === undefined ? undefined : field(m.linkname!, link, 'linkpath'))
  if (records.length === 0) return header
  if (!isUtf8Name(m.name) || (m.linkname !== undefined && !isUtf8Name(m.linkname))) records.unshift(paxRecord('hdrcharset', Buffer.from('BINARY')))
  const pax = Buffer.concat(records)
  return Buffer.concat([ustar(Buffer.from('PaxHeader'), 'x', pax.length, 0o644, m.mtimeMs), pax, tarPadding(pax.length), header])
}

/** A member's name and link target as tar-stream read them (escaped where not UTF-8), from warren's pax keys where they are. */
export function memberNames (h: Header): { name: string, linkname: string } {
  const pax = (h.pax ?? {}) as Record<string, string | undefined>
  const exact = (b64: string | undefined, plain: string): string => b64 === undefined ? plain : nameFromBytes(Buffer.from(b64, 'base64'))
  return { name: exact(pax['WARREN.path'], h.name), linkname: exact(pax['WARREN.linkpath'], h.linkname ?? '') }
}
