/**
 * The shape check of a `files` request as it comes off the wire: which op, and each field of
 * that op with its type. Sizes and bounds that belong to the sandbox's files (the maximum file
 * size, the chunk size) are checked there (`SandboxFileService`); this is the shape. The field
 * checkers are requests.ts's, handed in, so every request is refused in the same words.
 */
import type { WireName } from '../../file-names.js'
import type { ClientFileOp, FileRequest } from '../sandbox/index.js'

type Obj = Record<string, unknown>

/** The field checks of requests.ts: each returns the value or throws INVALID_ARGUMENT naming the field. */
export interface FieldChecks {
  text (v: unknown, field: string, max: number): string
  /** `text` that a C string can hold (no NUL). */
  cText (v: unknown, field: string, max: number): string
  count (v: unknown, field: string): number
  flag (v: unknown, field: string): boolean
  bytes (v: unknown, field: string): Uint8Array
  oneOf<T extends string> (v: unknown, field: string, allowed: readonly T[]): T
  invalid (field: string, why: string): never
}

const FILE_OPS: readonly ClientFileOp[] = [
  'stat', 'list', 'read', 'mkdir', 'remove', 'rename', 'write-begin', 'write-chunk', 'write-end', 'write-abort', 'tar-begin', 'tar-read', 'tar-end'
]

/** The longest transfer id a request may carry (the sandbox checks its characters). */
const MAX_TRANSFER_ID = 64
/** A sha256 in hex. */
const SHA256_HEX = 64

/**
 * Checks the op-specific fields of a files request.
 * @param r the request as received
 * @param c the field checks
 * @param maxPath the longest path
 * @returns a request holding only the op's known, well-typed fields
 */
export function parseFileRequest (r: Obj, c: FieldChecks, maxPath: number): FileRequest {
  // Refused here, naming the field: the sandbox's agent refuses NUL and length too, but without a field.
  const path = (key = 'path'): WireName => {
    const v = r[key]
    if (v instanceof Uint8Array) {
      // The bytes of a name that is not UTF-8 (see file-names.ts), kept as bytes to the node.
      if (v.length === 0 || v.length > maxPath) c.invalid(key, `must be 1 to ${maxPath} bytes`)
      if (v.includes(0)) c.invalid(key, 'must not hold NUL')
      return v
    }
    const p = c.cText(v, key, maxPath)
    if (Buffer.byteLength(p) > maxPath) c.invalid(key, `must be at most ${maxPath} bytes in UTF-8`)
    return p
  }
  const opt = <T>(key: string, check: (v: unknown, field: string) => T): Record<string, T> => (r[key] === undefined ? {} : { [key]: check(r[key], key) })
  const upload = (): string => c.text(r.upload, 'upload', MAX_TRANSFER_ID)
  const download = (): string => c.text(r.download, 'download', MAX_TRANSFER_ID)
  const mode = (v: unknown, f: string): number => {
    const n = c.count(v, f)
    if (n > 0o7777) c.invalid(f, 'must be permission bits (at most 0o7777)')
    return n
  }
  const op = c.oneOf(r.op, 'op', FILE_OPS)
  switch (op) {
    case 'stat': return { op, path: path(), ...opt('follow', c.flag) }
    case 'list': return { op, path: path() }
    case 'read': return { op, path: path(), offset: c.count(r.offset, 'offset'), length: c.count(r.length, 'length') }
    case 'mkdir': return { op, path: path(), ...opt('mode', mode), ...opt('parents', c.flag) }
    case 'remove': return { op, path: path(), ...opt('recursive', c.flag) }
    case 'rename': return { op, path: path(), to: path('to') }
    case 'write-begin': return {
      op, upload: upload(), path: path(), ...opt('format', (v, f) => c.oneOf(v, f, ['file', 'tar'] as const)), ...opt('mode', mode), ...opt('size', c.count)
    }
    case 'write-chunk': return { op, upload: upload(), offset: c.count(r.offset, 'offset'), data: c.bytes(r.data, 'data') }
    case 'write-end': return { op, upload: upload(), size: c.count(r.size, 'size'), ...opt('sha256', (v, f) => c.text(v, f, SHA256_HEX)) }
    case 'write-abort': return { op, upload: upload() }
    case 'tar-begin': return { op, download: download(), path: path() }
    case 'tar-read': return { op, download: download(), seq: c.count(r.seq, 'seq') }
    case 'tar-end': return { op, download: download() }
  }
}
