/**
 * A spec's `deterministic` field: what makes two sandboxes of one spec see the same world — the
 * same hostname, time zone, locale, build epoch and random seed. Checked with the rest of the
 * spec (BAD_SPEC naming `deterministic.<field>`), resolved at create (the seed is drawn then, so
 * it is in the spec the node, the trajectory header and a replay get), and applied on the node
 * as the hostname and env variables laid under the spec's own env.
 */
import { randomInt } from 'node:crypto'
import { bad, boundedNumber, isPlainObject, onlyKnown } from './spec-fields.js'

/** What `deterministic` holds once parsed; `seed` is set from create on. */
export interface Determinism {
  hostname: string
  tz: string
  lang: string
  /** Seconds since the epoch, as reproducible builds read `SOURCE_DATE_EPOCH`. */
  sourceDateEpoch: number
  /** A 32-bit unsigned integer: `WARREN_SEED` and `PYTHONHASHSEED`. */
  seed?: number
}

/** What `deterministic: true` means, and what an object leaves out. */
export const DeterminismDefaults = {
  hostname: 'sandbox',
  tz: 'UTC',
  lang: 'C.UTF-8',
  sourceDateEpoch: 0,
  maxHostname: 63,
  /** Longest `tz` and `lang` (`America/Argentina/ComodRivadavia` is 32). */
  maxText: 64,
  maxSourceDateEpoch: 2 ** 32,
  maxSeed: 2 ** 32 - 1
}

const FIELDS = ['hostname', 'tz', 'lang', 'sourceDateEpoch', 'seed'] as const
// One DNS label (RFC 1123): letters, digits and hyphens, neither first nor last a hyphen.
const HOSTNAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/
/** Printable ASCII without space: what a TZ or LANG value is made of, and nothing a shell or C string trips on. */
const PRINTABLE = /^[\x21-\x7e]+$/

function printable (v: unknown, field: string, fallback: string): string {
  if (v === undefined) return fallback
  const d = DeterminismDefaults
  if (typeof v !== 'string' || v.length === 0 || v.length > d.maxText || !PRINTABLE.test(v)) {
    bad(field, `must be 1 to ${d.maxText} printable ASCII characters without spaces`)
  }
  return v
}

/**
 * Checks a spec's `deterministic` field: `true` (every default, a seed drawn at create) or an
 * object whose fields default the same way.
 * @throws WARREN_ERR_BAD_SPEC naming `deterministic` or `deterministic.<field>`
 */
export function parseDeterminism (input: unknown): Determinism {
  const d = DeterminismDefaults
  if (input === true) return { hostname: d.hostname, tz: d.tz, lang: d.lang, sourceDateEpoch: d.sourceDateEpoch }
  if (!isPlainObject(input)) bad('deterministic', 'must be true or an object { hostname?, tz?, lang?, sourceDateEpoch?, seed? }')
  onlyKnown(input, FIELDS, 'deterministic.')
  const hostname = input.hostname ?? d.hostname
  if (typeof hostname !== 'string' || hostname.length === 0 || hostname.length > d.maxHostname || !HOSTNAME.test(hostname)) {
    bad('deterministic.hostname', `must be 1 to ${d.maxHostname} of A-Z, a-z, 0-9 and -, not beginning or ending with -`)
  }
  const out: Determinism = {
    hostname,
    tz: printable(input.tz, 'deterministic.tz', d.tz),
    lang: printable(input.lang, 'deterministic.lang', d.lang),
    sourceDateEpoch: boundedNumber(input.sourceDateEpoch, 'deterministic.sourceDateEpoch', d.sourceDateEpoch, { min: 0, max: d.maxSourceDateEpoch, integer: true })
  }
  if (input.seed !== undefined) out.seed = boundedNumber(input.seed, 'deterministic.seed', 0, { min: 0, max: d.maxSeed, integer: true })
  return out
}

/**
 * The spec as a create resolves it: a `deterministic` without a seed gets one drawn now (with
 * crypto), so every copy of the spec from here on — the node's, the trajectory's — holds it.
 */
export function resolveDeterminism<S extends { deterministic?: Determinism }> (spec: S): S {
  if (spec.deterministic === undefined || spec.deterministic.seed !== undefined) return spec
  return { ...spec, deterministic: { ...spec.deterministic, seed: randomInt(0, DeterminismDefaults.maxSeed + 1) } }
}

/**
 * What a sandbox of this spec is created with on its node: the deterministic variables laid
 * under the spec's env (the spec's own env wins), and the hostname when one is fixed.
 */
export function sandboxEnvironment (spec: { env: Record<string, string>, deterministic?: Determinism }): { env: Record<string, string>, hostname?: string } {
  const det = spec.deterministic
  if (det === undefined) return { env: spec.env }
  const fixed: Record<string, string> = {
    TZ: det.tz,
    LANG: det.lang,
    LC_ALL: det.lang,
    SOURCE_DATE_EPOCH: String(det.sourceDateEpoch),
    // A spec resolved at create always has its seed; one that does not (a test's) seeds with 0.
    WARREN_SEED: String(det.seed ?? 0),
    PYTHONHASHSEED: String(det.seed ?? 0)
  }
  return { env: { ...fixed, ...spec.env }, hostname: det.hostname }
}
