/**
 * The small checks a spec's fields are made of. Each refuses with `WARREN_ERR_BAD_SPEC` naming
 * the field (`details.field`), so a client learns exactly what to change.
 */
import { createError, ErrorCodes } from '../errors.js'

/** Refuses `field` of a spec. */
export function bad (field: string, why: string): never {
  throw createError(ErrorCodes.BAD_SPEC, `spec.${field} ${why}`, { field })
}

/** True for an object of fields as msgpack decodes a map (not an array, bytes or a class instance). */
export function isPlainObject (v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/** Refuses any key of `v` not in `known`. */
export function onlyKnown (v: Record<string, unknown>, known: readonly string[], prefix: string): void {
  for (const key of Object.keys(v)) if (!known.includes(key)) bad(`${prefix}${key}`, 'is not a known field')
}

export interface NumberBounds {
  min: number
  max: number
  /** Whole numbers only (MiB, pids, milliseconds). */
  integer?: boolean
  /** True when `min` itself is refused (an open interval at the bottom). */
  aboveMin?: boolean
}

/** A finite number within bounds, or `fallback` when absent. */
export function boundedNumber (v: unknown, field: string, fallback: number, b: NumberBounds): number {
  if (v === undefined) return fallback
  const low = b.aboveMin === true ? `(${b.min}` : `[${b.min}`
  const what = `must be ${b.integer === true ? 'a whole number' : 'a number'} in ${low}, ${b.max}]`
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(field, what)
  if (b.integer === true && !Number.isInteger(v)) bad(field, what)
  if (v < b.min || (b.aboveMin === true && v === b.min) || v > b.max) bad(field, what)
  return v
}

export interface StringMapBounds {
  maxEntries: number
  maxKey: number
  maxValue: number
  /** Why a key is refused beyond length (e.g. env names cannot hold `=`), or undefined. */
  badKey?: (key: string) => string | undefined
}

/** Why an environment variable name is refused: `=` would split it, so it could set another. */
export function badEnvName (name: string): string | undefined {
  return name.includes('=') ? 'is not a variable name (it holds =)' : undefined
}

/**
 * An object of strings (labels, env). Keys are non-empty and bounded, values bounded; neither may
 * hold NUL (it would cut a C string short on the node). `__proto__` is refused: as a key of a
 * plain object it would silently vanish.
 * @param refuse how a bad field is refused: BAD_SPEC (a spec's), or the caller's own code
 */
export function stringMap (v: unknown, field: string, b: StringMapBounds, refuse: (field: string, why: string) => never = bad): Record<string, string> {
  if (v === undefined) return {}
  if (!isPlainObject(v)) refuse(field, 'must be an object of strings')
  const entries = Object.entries(v)
  if (entries.length > b.maxEntries) refuse(field, `has more than ${b.maxEntries} entries`)
  const out: Record<string, string> = {}
  for (const [k, val] of entries) {
    const name = `${field}.${k}`
    if (k.length === 0 || k.length > b.maxKey) refuse(name, `needs a key of 1 to ${b.maxKey} characters`)
    if (k.includes('\0')) refuse(name, 'has a key holding NUL')
    if (k === '__proto__') refuse(name, 'is a reserved key')
    const why = b.badKey?.(k)
    if (why !== undefined) refuse(name, why)
    if (typeof val !== 'string') refuse(name, 'must be a string')
    if (val.length > b.maxValue) refuse(name, `is longer than ${b.maxValue}`)
    if (val.includes('\0')) refuse(name, 'holds NUL')
    out[k] = val
  }
  return out
}
