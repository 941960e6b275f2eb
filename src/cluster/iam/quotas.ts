/**
 * A tenant's quotas, their defaults and the check every change passes before it is written.
 */
import { createError, ErrorCodes } from '../../errors.js'

export interface Quotas {
  /** Sandboxes alive at once. */
  maxSandboxes: number
  /** Sustained creations per second (token bucket rate). */
  createsPerSecond: number
  /** Creations allowed in one burst (token bucket size). */
  createBurst: number
  /**
   * Sustained requests per second over all the tenant's sessions, of every type (a create of
   * 1,000 is one request, and its sandboxes count against the create rate as well).
   */
  requestsPerSecond: number
  /** Requests allowed in one burst. */
  requestBurst: number
  /**
   * Bytes the control plane keeps of the tenant's trajectories (steps and record blobs). Past
   * it, its oldest ended trajectories go first, before their retention; its live ones are bounded
   * by `maxSandboxes` times a sandbox's own bound (`TrajectoryDefaults.maxTrajectoryBytes`).
   */
  trajectoryBytes: number
}

/**
 * The request rate is what bounds one tenant's share of what every tenant shares: the gateway's
 * turns, the audit log's queue, the log. 10,000 a second is ten requests a second for each of
 * 1,000 rollouts; the create benchmark's 20,000 creations a second are about 1,000 requests.
 */
export const QuotaDefaults: Quotas = {
  maxSandboxes: 100_000, createsPerSecond: 20_000, createBurst: 20_000, requestsPerSecond: 10_000, requestBurst: 20_000, trajectoryBytes: 64 * 2 ** 30
}

/** Each rate and the burst that goes with it: a rate given alone brings its own burst. */
export const RATE_BURSTS = [['createsPerSecond', 'createBurst'], ['requestsPerSecond', 'requestBurst']] as const

/** The bounds of each quota: what a value must be, and whether it must be whole. */
const BOUNDS: Record<keyof Quotas, { min: number, max: number, integer: boolean }> = {
  maxSandboxes: { min: 0, max: 1e9, integer: true },
  createsPerSecond: { min: 0.001, max: 1e9, integer: false },
  createBurst: { min: 1, max: 1e9, integer: false },
  requestsPerSecond: { min: 0.001, max: 1e9, integer: false },
  requestBurst: { min: 1, max: 1e9, integer: false },
  trajectoryBytes: { min: 0, max: 2 ** 50, integer: true }
}

/**
 * Checks a quota change as a client sent it: an object of known quotas, each a number in its bounds.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the field (`quotas.<name>`)
 */
export function checkQuotas (input: unknown): Partial<Quotas> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `quotas is an object of ${Object.keys(BOUNDS).join(', ')}`, { field: 'quotas' })
  }
  const out: Partial<Quotas> = {}
  for (const [name, value] of Object.entries(input)) {
    if (!Object.hasOwn(BOUNDS, name)) throw createError(ErrorCodes.INVALID_ARGUMENT, `there is no quota ${name}`, { field: `quotas.${name}` })
    const b = BOUNDS[name as keyof Quotas]
    if (typeof value !== 'number' || !Number.isFinite(value) || value < b.min || value > b.max || (b.integer && !Number.isInteger(value))) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `${name} must be ${b.integer ? 'an integer' : 'a number'} in [${b.min}, ${b.max}]`, { field: `quotas.${name}` })
    }
    out[name as keyof Quotas] = value
  }
  return out
}
