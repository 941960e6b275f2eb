/**
 * The sandbox spec a trainer sends, and its validation. Everything that crosses the wire from
 * a client is checked here once; a bad field is refused with `WARREN_ERR_BAD_SPEC` naming it.
 */
import type { BackendKind } from '../backends/types.js'
import { parseEgressRules } from '../backends/container/index.js'
import { createError, ErrorCodes } from '../errors.js'
import type { PlacementRequest } from './placement/index.js'

export const BACKEND_KINDS: readonly BackendKind[] = ['function', 'container', 'microvm', 'fullvm']

export interface SandboxLimits {
  /** CPUs, fractional (0.5 = half a core). */
  cpus: number
  memoryMiB: number
  diskMiB: number
  pids: number
}

export interface SandboxSpec {
  backend: BackendKind
  /** Lifetime; the sandbox is reclaimed after it, whatever it is doing. */
  ttlMs: number
  /** Reclaimed after this long without an exec; 0 = never. */
  idleTimeoutMs: number
  labels: Record<string, string>
  limits: SandboxLimits
  env: Record<string, string>
  /** Layer stack (container and VM backends); a name or digest per layer. */
  image?: { base: string, workspace?: string, tools?: string[] }
  /**
   * The way out (container backend): hosts reachable through the sandbox's egress proxy
   * (`pypi.org`, `*.pythonhosted.org`, `host:port`). Without it, loopback only.
   */
  network?: { egress: string[] }
}

/** Defaults and bounds of a spec, in one place. */
export const SpecDefaults = {
  backend: 'function' as BackendKind,
  ttlMs: 3_600_000,
  maxTtlMs: 7 * 24 * 3_600_000,
  idleTimeoutMs: 0,
  /**
   * What a sandbox reserves when its spec names no limits. A function call borrows a shared
   * worker for milliseconds, so it reserves a sliver; the others reserve what a task needs.
   */
  limits: {
    function: { cpus: 0.01, memoryMiB: 16, diskMiB: 0, pids: 1 },
    container: { cpus: 1, memoryMiB: 512, diskMiB: 1024, pids: 512 },
    microvm: { cpus: 1, memoryMiB: 512, diskMiB: 1024, pids: 4096 },
    fullvm: { cpus: 2, memoryMiB: 2048, diskMiB: 8192, pids: 32_768 }
  } satisfies Record<BackendKind, SandboxLimits>,
  maxLabels: 32,
  maxLabelLength: 256,
  maxEnv: 256,
  maxEnvValue: 32 * 1024
}

function bad (field: string, why: string): never {
  throw createError(ErrorCodes.BAD_SPEC, `spec.${field} ${why}`, { field })
}

function isPlainObject (v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array)
}

function positiveNumber (v: unknown, field: string, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined) return fallback
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max) bad(field, `must be a number in (0, ${max}]`)
  return v
}

function stringMap (v: unknown, field: string, maxEntries: number, maxValue: number): Record<string, string> {
  if (v === undefined) return {}
  if (!isPlainObject(v)) bad(field, 'must be an object of strings')
  const out: Record<string, string> = {}
  const entries = Object.entries(v)
  if (entries.length > maxEntries) bad(field, `has more than ${maxEntries} entries`)
  for (const [k, val] of entries) {
    if (k.length === 0 || k.length > 256) bad(`${field}.${k}`, 'has a bad key length')
    if (typeof val !== 'string') bad(`${field}.${k}`, 'must be a string')
    if (val.length > maxValue) bad(`${field}.${k}`, `is longer than ${maxValue}`)
    out[k] = val
  }
  return out
}

/**
 * Checks a spec from the wire and fills in defaults.
 * @throws WARREN_ERR_BAD_SPEC with `details.field`
 */
export function parseSandboxSpec (input: unknown): SandboxSpec {
  if (input === undefined || input === null) input = {}
  if (!isPlainObject(input)) bad('', 'must be an object')
  const known = new Set(['backend', 'ttlMs', 'idleTimeoutMs', 'labels', 'limits', 'env', 'image', 'network'])
  for (const key of Object.keys(input)) if (!known.has(key)) bad(key, 'is not a known field')

  const backend = input.backend ?? SpecDefaults.backend
  if (typeof backend !== 'string' || !BACKEND_KINDS.includes(backend as BackendKind)) {
    bad('backend', `must be one of ${BACKEND_KINDS.join(', ')}`)
  }
  const limitsIn = input.limits ?? {}
  if (!isPlainObject(limitsIn)) bad('limits', 'must be an object')
  const d = SpecDefaults.limits[backend as BackendKind]
  for (const key of Object.keys(limitsIn)) if (!(key in d)) bad(`limits.${key}`, 'is not a known limit')
  const limits: SandboxLimits = {
    cpus: positiveNumber(limitsIn.cpus, 'limits.cpus', d.cpus, 1024),
    memoryMiB: positiveNumber(limitsIn.memoryMiB, 'limits.memoryMiB', d.memoryMiB, 16 * 1024 * 1024),
    diskMiB: limitsIn.diskMiB === undefined ? d.diskMiB : positiveNumber(limitsIn.diskMiB, 'limits.diskMiB', d.diskMiB, 64 * 1024 * 1024),
    pids: positiveNumber(limitsIn.pids, 'limits.pids', d.pids, 4_194_304)
  }
  const idle = input.idleTimeoutMs
  if (idle !== undefined && (typeof idle !== 'number' || !Number.isFinite(idle) || idle < 0)) bad('idleTimeoutMs', 'must be a number >= 0')

  const spec: SandboxSpec = {
    backend: backend as BackendKind,
    ttlMs: positiveNumber(input.ttlMs, 'ttlMs', SpecDefaults.ttlMs, SpecDefaults.maxTtlMs),
    idleTimeoutMs: (idle as number | undefined) ?? SpecDefaults.idleTimeoutMs,
    labels: stringMap(input.labels, 'labels', SpecDefaults.maxLabels, SpecDefaults.maxLabelLength),
    limits,
    env: stringMap(input.env, 'env', SpecDefaults.maxEnv, SpecDefaults.maxEnvValue)
  }
  if (input.image !== undefined) {
    const image = input.image
    if (!isPlainObject(image) || typeof image.base !== 'string' || image.base.length === 0) bad('image.base', 'must be a layer name or digest')
    if (image.workspace !== undefined && typeof image.workspace !== 'string') bad('image.workspace', 'must be a string')
    if (image.tools !== undefined && (!Array.isArray(image.tools) || !image.tools.every((t) => typeof t === 'string'))) bad('image.tools', 'must be a list of strings')
    spec.image = { base: image.base, ...(image.workspace !== undefined ? { workspace: image.workspace as string } : {}), ...(image.tools !== undefined ? { tools: image.tools as string[] } : {}) }
  }
  if (input.network !== undefined) {
    const network = input.network
    if (!isPlainObject(network)) bad('network', 'must be an object')
    for (const key of Object.keys(network)) if (key !== 'egress') bad(`network.${key}`, 'is not a known field')
    if (network.egress !== undefined) {
      if (backend !== 'container') bad('network.egress', 'is offered by the container backend only')
      const egress = parseEgressRules(network.egress)
      if (egress.length > 0) spec.network = { egress }
    }
  }
  return spec
}

/** Checks an argv from the wire: a non-empty list of strings of bounded size. */
export function parseArgv (input: unknown): string[] {
  if (!Array.isArray(input) || input.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'argv must be a non-empty list of strings', { field: 'argv' })
  let bytes = 0
  for (const a of input) {
    if (typeof a !== 'string') throw createError(ErrorCodes.INVALID_ARGUMENT, 'argv must hold only strings', { field: 'argv' })
    bytes += a.length
  }
  if (input.length > 4096 || bytes > 1024 * 1024) throw createError(ErrorCodes.INVALID_ARGUMENT, 'argv is too large', { field: 'argv' })
  return input as string[]
}

/** What placing a sandbox of this spec reserves on a node. */
export function placementRequestOf (spec: SandboxSpec): PlacementRequest {
  const layers = spec.image === undefined ? [] : [spec.image.base, ...(spec.image.workspace !== undefined ? [spec.image.workspace] : []), ...(spec.image.tools ?? [])]
  return { backend: spec.backend, cpus: spec.limits.cpus, memoryMiB: spec.limits.memoryMiB, layers }
}
