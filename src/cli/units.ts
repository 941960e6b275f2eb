/**
 * Numbers, durations, sizes and `key=value` pairs as a person types them in a flag (`8`, `0.5`,
 * `24h`, `90m`, `1.5TiB`, `run=r1`). Each refusal is INVALID_ARGUMENT naming the flag.
 */
import { createError, ErrorCodes } from '../errors.js'

const DURATION_UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const
const MEMORY_UNITS = { MiB: 1, GiB: 1024, TiB: 1024 * 1024 } as const
/** A size with its unit: `1.5TiB`, `512GiB`, `65536MiB`. */
const MEMORY_PATTERN = /^(\d+(?:\.\d+)?)(MiB|GiB|TiB)$/

/**
 * `24h`, `90m`, `3600s`, `500ms` → ms.
 * @param field the flag the text came from, named in the refusal
 */
export function parseDuration (text: string, field?: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim())
  if (m === null) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${field !== undefined ? `--${field}: ` : ''}durations look like 24h, 90m or 30s, not ${text}`, field !== undefined ? { field } : undefined)
  }
  return Number(m[1]) * DURATION_UNITS[m[2] as keyof typeof DURATION_UNITS]
}

/**
 * A duration flag that also takes plain milliseconds, as it always has (`--ttl 600000` or `--ttl 10m`).
 * Whole milliseconds, more than zero.
 */
export function parseMilliseconds (text: string, field: string): number {
  const ms = /^\d+$/.test(text.trim()) ? Number(text) : parseDuration(text, field)
  if (!Number.isSafeInteger(Math.round(ms)) || Math.round(ms) <= 0) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--${field} must be more than 0 ms (e.g. 600000, 10m, 2h), not ${text}`, { field })
  }
  return Math.round(ms)
}

/** What a number flag may be: digits only (`whole`), and its bounds (`above` is exclusive). */
export interface NumberForm {
  whole?: boolean
  min?: number
  above?: number
  max?: number
}

/** A decimal number as a person writes one: 5, -1, 0.5, .5, 1e9. */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i

/**
 * A number as typed (`2`, `0.5`): only its form and the bounds the CLI itself needs; the control
 * plane holds the rest and names its own field past them.
 * @param label how the refusal names it (`--pids`, or `N` for an argument)
 * @param field the refusal's field (default: the label without its dashes)
 */
export function parseNumber (text: string, label: string, form: NumberForm = {}, field = label.replace(/^--/, '')): number {
  const refuse = (must: string): never => {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${label} must be ${must}, not ${JSON.stringify(text)}`, { field })
  }
  const t = text.trim()
  const n = Number(t)
  // Decimal only: Number() would also take 0x10, 0b1 and 1_0 forms nobody means in a flag.
  if (form.whole === true ? !/^\d+$/.test(t) || !Number.isSafeInteger(n) : !DECIMAL.test(t) || !Number.isFinite(n)) refuse(form.whole === true ? 'a whole number' : 'a number')
  const { min, above, max } = form
  const range = [min !== undefined ? `at least ${min}` : above !== undefined ? `more than ${above}` : '', max !== undefined ? `at most ${max}` : ''].filter((x) => x !== '').join(' and ')
  if ((min !== undefined && n < min) || (above !== undefined && n <= above) || (max !== undefined && n > max)) refuse(range)
  return n
}

/**
 * A size flag in MiB, plain (`512`) or with its unit (`512MiB`, `2GiB`), as `--memory` and
 * `--disk` take it.
 */
export function parseMebibytes (text: string, field: string): number {
  if (/^\d+$/.test(text.trim())) return parseNumber(text, `--${field}`, { whole: true }, field)
  if (!MEMORY_PATTERN.test(text.trim())) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--${field}: sizes look like 512 (MiB), 512MiB or 2GiB, not ${text}`, { field })
  }
  return parseMemory(text, field)
}

/** `1.5TiB`, `512GiB`, `65536MiB` → MiB. */
export function parseMemory (text: string, field?: string): number {
  const m = MEMORY_PATTERN.exec(text.trim())
  if (m === null) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${field !== undefined ? `--${field}: ` : ''}memory looks like 1.5TiB or 512GiB, not ${text}`, field !== undefined ? { field } : undefined)
  }
  return Math.round(Number(m[1]) * MEMORY_UNITS[m[2] as keyof typeof MEMORY_UNITS])
}

/**
 * Repeated `--flag key=value` as a map (`--label run=r1`, `--egress-host pypi=10.0.0.5:3141`).
 * @param field the flag, named in the refusal of a pair without `=` or with an empty key
 * @param shape how a pair looks, for that refusal (`key=value`)
 * @returns undefined when the flag was not given
 */
export function parsePairs (pairs: string[] | undefined, field: string, shape = 'key=value'): Record<string, string> | undefined {
  if (pairs === undefined || pairs.length === 0) return undefined
  const out: Record<string, string> = {}
  for (const p of pairs) {
    const eq = p.indexOf('=')
    if (eq <= 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `--${field} takes ${shape}, got ${p}`, { field })
    out[p.slice(0, eq)] = p.slice(eq + 1)
  }
  return out
}
