/**
 * The Range header of RFC 9110, single range only: `bytes=a-b`, `bytes=a-`, `bytes=-n`.
 *
 * A header that does not parse is ignored (the RFC's rule), giving the whole object. Several
 * ranges in one header are refused with 416 rather than answered with the whole object: readers
 * of this store ask for one chunk at a time, and a multi-range request for a 12 GiB layer should
 * not turn into a 12 GiB download.
 */

export type RangeResult =
  | { kind: 'full' }
  /** Bytes `start..end`, both inclusive, as in Content-Range. */
  | { kind: 'partial', start: number, end: number }
  | { kind: 'unsatisfiable' }

const SINGLE = /^bytes=(\d*)-(\d*)$/

/**
 * What to send for a Range header against an object of `size` bytes.
 * @param header the raw header value, or undefined when absent
 */
export function parseRange (header: string | undefined, size: number): RangeResult {
  if (header === undefined) return { kind: 'full' }
  const value = header.trim()
  if (/^bytes=.*,/.test(value)) return { kind: 'unsatisfiable' }
  const m = SINGLE.exec(value)
  if (m === null) return { kind: 'full' }
  const [, a = '', b = ''] = m
  if (a === '' && b === '') return { kind: 'full' }
  if (a === '') {
    // Suffix: the last n bytes.
    const n = Number(b)
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' }
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 }
  }
  const start = Number(a)
  // Digits beyond 2^53 lose precision; such a start is past any real object anyway.
  if (!Number.isSafeInteger(start) || start >= size) return { kind: 'unsatisfiable' }
  if (b === '') return { kind: 'partial', start, end: size - 1 }
  const last = Number(b)
  if (last < start) return { kind: 'full' } // invalid range-spec: ignore the header
  return { kind: 'partial', start, end: Math.min(last, size - 1) }
}
