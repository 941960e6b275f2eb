/**
 * Text that any peer can decode. A JavaScript string may hold lone surrogates (file-names.ts
 * keeps a name's bytes that are not UTF-8 as U+DC80..U+DCFF); msgpack writes those as bytes that
 * are not UTF-8, and a strict decoder (Python's) then refuses the whole frame. So text meant for
 * people (messages, log lines) goes out well-formed.
 */

/** A lone surrogate: in a `u` regex a surrogate pair is one code point and does not match. */
export const LONE_SURROGATE = /\p{Cs}/u

/** The string with each escaped byte (U+DC80..U+DCFF) shown as `\xHH` and any other lone surrogate as U+FFFD. */
export function wellFormed (s: string): string {
  if (!LONE_SURROGATE.test(s)) return s
  let out = ''
  for (const ch of s) {
    const cp = ch.codePointAt(0)!
    out += cp >= 0xdc80 && cp <= 0xdcff ? `\\x${(cp - 0xdc00).toString(16)}` : cp >= 0xd800 && cp <= 0xdfff ? '\ufffd' : ch
  }
  return out
}
