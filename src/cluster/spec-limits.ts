/**
 * A spec's resource limits: whole MiB and pids, CPUs in hundredths or more, each capped by the
 * cluster's configured maximum (`SpecDefaults.max`). Whether a node could ever hold them is
 * placement's question (it knows the nodes); this only refuses what no cluster should accept.
 */
import { bad, boundedNumber, isPlainObject, onlyKnown } from './spec-fields.js'
import type { SandboxLimits } from './spec.js'

/** The smallest CPU share a cgroup can enforce: 1 ms of quota in a 100 ms period. */
export const MIN_CPUS = 0.01

/**
 * Checks `input.limits` and fills in the backend's defaults.
 * @param defaults what the backend reserves when a limit is absent
 * @param max the cluster's maximum per sandbox
 */
export function parseLimits (input: unknown, defaults: SandboxLimits, max: SandboxLimits): SandboxLimits {
  const limits = input ?? {}
  if (!isPlainObject(limits)) bad('limits', 'must be an object')
  onlyKnown(limits, Object.keys(defaults), 'limits.')
  return {
    cpus: boundedNumber(limits.cpus, 'limits.cpus', defaults.cpus, { min: MIN_CPUS, max: max.cpus }),
    memoryMiB: boundedNumber(limits.memoryMiB, 'limits.memoryMiB', defaults.memoryMiB, { min: 1, max: max.memoryMiB, integer: true }),
    // 0 would mean a writable layer on the host disk without a bound: never a tenant's choice.
    diskMiB: boundedNumber(limits.diskMiB, 'limits.diskMiB', defaults.diskMiB, { min: 1, max: max.diskMiB, integer: true }),
    pids: boundedNumber(limits.pids, 'limits.pids', defaults.pids, { min: 1, max: max.pids, integer: true })
  }
}
