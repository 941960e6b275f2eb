/**
 * The sandbox spec a trainer sends, and its validation. Everything that crosses the wire from
 * a client is checked here once; a bad field is refused with `WARREN_ERR_BAD_SPEC` naming it.
 */
import type { BackendKind, MemoryState } from '../backends/types.js'
import { parseEgressRules } from '../backends/container/index.js'
import { createError, ErrorCodes } from '../errors.js'
import type { PlacementRequest } from './placement/index.js'
import { parseDeterminism, type Determinism } from './spec-determinism.js'
import { bad, badEnvName, boundedNumber, isPlainObject, onlyKnown, stringMap } from './spec-fields.js'
import { ImageRefDefaults, specLayers, parseImage } from './spec-image.js'
import { isImageName } from '../images/index.js'
import { parseLimits } from './spec-limits.js'

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
  /**
   * Layer stack (container and VM backends); a name or digest per layer. `diffs` (bottom first)
   * are a snapshot's layers, set by the control plane from `snapshot`; a client cannot send them.
   */
  image?: { base: string, workspace?: string, tools?: string[], diffs?: string[] }
  /**
   * The snapshot (id `snap-…`, or name `name:tag`) the sandbox starts from; the control plane
   * resolves it to the snapshot's id and lays its layers into `image`.
   */
  snapshot?: string
  /**
   * A memory snapshot's saved machine state (microvm), set by the control plane from `snapshot`
   * beside its layers; a client cannot send it. The sandbox goes on from that instant, its
   * processes running.
   */
  memory?: MemoryState
  /**
   * The way out (container and microvm backends): hosts reachable through the sandbox's egress proxy
   * (`pypi.org`, `*.pythonhosted.org`, `host:port`). Without it, loopback only.
   */
  network?: { egress: string[] }
  /** False: time paused does not count against `ttlMs` (its end moves on at resume). Absent: true. */
  pausedTtl?: boolean
  /** A fixed hostname, time zone, locale, build epoch and seed (spec-determinism.ts); the seed is drawn at create. */
  deterministic?: Determinism
}

/** Defaults and bounds of a spec, in one place. */
export const SpecDefaults = {
  backend: 'function' as BackendKind,
  ttlMs: 3_600_000,
  maxTtlMs: 7 * 24 * 3_600_000,
  /** 0 = never; at most `maxTtlMs` (a longer idle time could never be reached). */
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
  /**
   * The cluster's maximum per sandbox, whatever its nodes: beyond it a spec is refused as
   * malformed. (Within it, a spec no joined node could hold is placement's NO_CAPACITY.)
   */
  max: { cpus: 256, memoryMiB: 1024 * 1024, diskMiB: 1024 * 1024, pids: 65_536 } satisfies SandboxLimits,
  maxLabels: 32,
  maxLabelLength: 256,
  maxEnv: 256,
  maxEnvName: 256,
  maxEnvValue: 32 * 1024
}

/** The backends whose sandboxes reach out through an egress proxy (`network.egress`). */
const EGRESS_BACKENDS: readonly BackendKind[] = ['container', 'microvm']

const KNOWN_FIELDS = ['backend', 'ttlMs', 'idleTimeoutMs', 'labels', 'limits', 'env', 'image', 'network', 'snapshot', 'pausedTtl', 'deterministic'] as const

/**
 * Checks a spec from the wire and fills in defaults.
 * @throws WARREN_ERR_BAD_SPEC with `details.field`
 */
export function parseSandboxSpec (input: unknown): SandboxSpec {
  if (input === undefined || input === null) input = {}
  if (!isPlainObject(input)) bad('', 'must be an object')
  onlyKnown(input, KNOWN_FIELDS, '')

  const backend = input.backend ?? SpecDefaults.backend
  if (typeof backend !== 'string' || !BACKEND_KINDS.includes(backend as BackendKind)) {
    bad('backend', `must be one of ${BACKEND_KINDS.join(', ')}`)
  }
  const kind = backend as BackendKind
  const d = SpecDefaults
  const spec: SandboxSpec = {
    backend: kind,
    ttlMs: boundedNumber(input.ttlMs, 'ttlMs', d.ttlMs, { min: 1, max: d.maxTtlMs, integer: true }),
    idleTimeoutMs: boundedNumber(input.idleTimeoutMs, 'idleTimeoutMs', d.idleTimeoutMs, { min: 0, max: d.maxTtlMs, integer: true }),
    labels: stringMap(input.labels, 'labels', { maxEntries: d.maxLabels, maxKey: d.maxLabelLength, maxValue: d.maxLabelLength }),
    limits: parseLimits(input.limits, d.limits[kind], d.max),
    env: stringMap(input.env, 'env', { maxEntries: d.maxEnv, maxKey: d.maxEnvName, maxValue: d.maxEnvValue, badKey: badEnvName })
  }
  if (input.snapshot !== undefined) {
    spec.snapshot = snapshotRef(input.snapshot)
    if (input.image !== undefined) bad('image', 'cannot be given beside snapshot: the snapshot holds the layers')
  }
  if (input.image !== undefined) spec.image = parseImage(input.image, kind)
  if (input.network !== undefined) {
    const network = input.network
    if (!isPlainObject(network)) bad('network', 'must be an object')
    onlyKnown(network, ['egress'], 'network.')
    if (network.egress !== undefined) {
      if (!EGRESS_BACKENDS.includes(kind)) bad('network.egress', `is offered by the ${EGRESS_BACKENDS.join(' and ')} backends only`)
      const egress = parseEgressRules(network.egress)
      if (egress.length > 0) spec.network = { egress }
    }
  }
  if (input.pausedTtl !== undefined) {
    if (typeof input.pausedTtl !== 'boolean') bad('pausedTtl', 'must be true or false')
    spec.pausedTtl = input.pausedTtl
  }
  if (input.deterministic !== undefined) spec.deterministic = parseDeterminism(input.deterministic)
  return spec
}

/** Checks `spec.snapshot`: a snapshot id (`snap-` and 16 of [0-9a-z]) or a name (`name:tag`). */
function snapshotRef (v: unknown): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > ImageRefDefaults.maxRefLength) bad('snapshot', `must be a snapshot id or name of 1 to ${ImageRefDefaults.maxRefLength} characters`)
  if (!/^snap-[0-9a-z]{16}$/.test(v) && !isImageName(v)) bad('snapshot', 'must be a snapshot id (snap-…) or a name (name:tag)')
  return v
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
  const layers = spec.image === undefined ? [] : specLayers(spec.image).map((l) => l.ref)
  const m = spec.memory
  return {
    backend: spec.backend, cpus: spec.limits.cpus, memoryMiB: spec.limits.memoryMiB, diskMiB: spec.limits.diskMiB, layers,
    ...(m !== undefined ? { memory: { state: m.state, ...(m.machine !== undefined ? { machine: m.machine } : {}) } } : {})
  }
}
