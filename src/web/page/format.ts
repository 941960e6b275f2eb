/** Small formatting helpers for the page: times, sizes, durations, bytes as text. */

/** "12 s ago", "3 min ago", or a clock time past an hour. */
export function ago (ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000))
  if (s < 60) return `${s} s ago`
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  return new Date(ms).toLocaleString()
}

/** "in 4 min", "in 2 h", or "past" for a time gone by. */
export function until (ms: number, now = Date.now()): string {
  const s = Math.round((ms - now) / 1000)
  if (s <= 0) return 'past'
  if (s < 60) return `in ${s} s`
  if (s < 3600) return `in ${Math.floor(s / 60)} min`
  if (s < 86400) return `in ${Math.floor(s / 3600)} h`
  return `in ${Math.floor(s / 86400)} d`
}

export function bytes (n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`
  return `${(n / 1024 ** 3).toFixed(2)} GiB`
}

export function duration (ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`
}

const decoder = new TextDecoder('utf-8', { fatal: false })

/** Recorded bytes as text (invalid UTF-8 shown as U+FFFD), cut to `max` characters. */
export function text (data: Uint8Array | undefined, max = 64 * 1024): string {
  if (data === undefined) return ''
  const s = decoder.decode(data.length > max ? data.subarray(0, max) : data)
  return data.length > max ? `${s}\n… (${bytes(data.length - max)} more)` : s
}

/** A path of a step: a string, or the bytes of a name that is not UTF-8 (shown with U+FFFD where they are not). */
export function pathName (v: string | Uint8Array | undefined): string {
  return v === undefined ? '' : typeof v === 'string' ? v : new TextDecoder().decode(v)
}

/** A digest shown short: the first 12 hex digits. */
export function shortDigest (d: string): string {
  return d.startsWith('sha256:') ? d.slice(7, 19) : d.slice(0, 12)
}

/** An argv as a shell would show it: words with spaces or quotes single-quoted. */
export function commandLine (argv: string[]): string {
  return argv.map((a) => /^[A-Za-z0-9_./:=@%+-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`).join(' ')
}
