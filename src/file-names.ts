/**
 * File names as bytes. A Linux file name is any bytes but `/` and NUL, and not every one is
 * UTF-8 (a Latin-1 name from an old archive, a test fixture, a fuzzer's output). warren keeps
 * them exact the way Python's `os.fsdecode` does (PEP 383, "surrogateescape"):
 *
 * - in JavaScript a name is a string: its UTF-8 decoded, and each byte that is not part of valid
 *   UTF-8 the lone surrogate U+DC00 + byte (U+DC80..U+DCFF), so `b'caf\xe9'` is `'caf\udce9'`;
 *   such a string goes back to exactly its bytes, and a name listed can be passed back as a path;
 * - on the wire (msgpack, to the agent and to clients) a name or path is a str when it is UTF-8
 *   and a bin of its bytes when it is not: a lone surrogate never goes into a msgpack str, which
 *   a strict decoder (Python's) refuses whole.
 */
import { createError, ErrorCodes } from './errors.js'
import { LONE_SURROGATE, wellFormed } from './text.js'

/** A name or path as it travels: a str, or the bytes of one that is not UTF-8. */
export type WireName = string | Uint8Array

const strict = new TextDecoder('utf-8', { fatal: true })

/** The length of the UTF-8 sequence starting at `i`, or 0 when none valid starts there. */
function sequenceAt (b: Uint8Array, i: number): number {
  const c = b[i]!
  if (c < 0x80) return 1
  let len: number; let cp: number; let min: number
  if ((c & 0xe0) === 0xc0) { len = 2; cp = c & 0x1f; min = 0x80 } else if ((c & 0xf0) === 0xe0) { len = 3; cp = c & 0x0f; min = 0x800 } else if ((c & 0xf8) === 0xf0) { len = 4; cp = c & 0x07; min = 0x10000 } else return 0
  if (i + len > b.length) return 0
  for (let k = 1; k < len; k++) {
    const d = b[i + k]!
    if ((d & 0xc0) !== 0x80) return 0
    cp = (cp << 6) | (d & 0x3f)
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0
  return len
}

/** A name's bytes as a string: UTF-8, each byte outside valid UTF-8 escaped as U+DC00 + byte. */
export function nameFromBytes (bytes: Uint8Array): string {
  try {
    return strict.decode(bytes)
  } catch {
    let out = ''
    for (let i = 0; i < bytes.length;) {
      const len = sequenceAt(bytes, i)
      if (len === 0) {
        out += String.fromCharCode(0xdc00 + bytes[i]!)
        i += 1
      } else {
        out += strict.decode(bytes.subarray(i, i + len))
        i += len
      }
    }
    return out
  }
}

/**
 * A name's bytes: its UTF-8, each escaped byte (U+DC80..U+DCFF standing alone) as that byte.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `field` for any other lone surrogate, which no byte decodes to
 */
export function nameToBytes (name: string, field = 'path'): Buffer {
  if (!LONE_SURROGATE.test(name)) return Buffer.from(name, 'utf8')
  const parts: Buffer[] = []
  let run = ''
  for (const ch of name) { // by code point: a surrogate pair is one, a lone surrogate one of its own
    const cp = ch.codePointAt(0)!
    if (cp >= 0xd800 && cp <= 0xdfff) {
      if (cp < 0xdc80 || cp > 0xdcff) throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} holds the lone surrogate U+${cp.toString(16).toUpperCase()}, which is no byte's escape`, { field })
      parts.push(Buffer.from(run, 'utf8'), Buffer.of(cp - 0xdc00))
      run = ''
    } else {
      run += ch
    }
  }
  parts.push(Buffer.from(run, 'utf8'))
  return Buffer.concat(parts)
}

/** True when the name is UTF-8 as it stands (nothing escaped in it). */
export function isUtf8Name (name: string): boolean {
  return !LONE_SURROGATE.test(name)
}

/** A name for the wire: itself when it is UTF-8, else its bytes. */
export function nameToWire (name: string, field = 'path'): WireName {
  return isUtf8Name(name) ? name : nameToBytes(name, field)
}

/** A name off the wire: a str as it is, the bytes of a bin decoded with escapes. */
export function nameFromWire (v: WireName): string {
  return typeof v === 'string' ? v : nameFromBytes(v)
}

/** A name for people (a log line, an audit record, a message): escaped bytes shown as `\xHH`. */
export function shownName (v: WireName): string {
  return wellFormed(nameFromWire(v))
}
