/**
 * Sandbox limits as cgroup interface-file writes. Planning is separate from writing so the v1
 * and v2 plans can be checked on any host, whatever its own layout.
 */
import { createError, ErrorCodes } from '../../../errors.js'
import { CgroupDefaults } from './defaults.js'
import type { Controller, SandboxLimits } from './types.js'

const MiB = 1024 * 1024

/** Limits in kernel units; undefined means unlimited. */
export interface KernelLimits {
  memoryBytes: number | undefined
  cpuQuotaUs: number | undefined
  cpuPeriodUs: number
  pids: number | undefined
}

/** One write into an interface file; `optional` ones are skipped where the kernel lacks the file. */
export interface LimitWrite {
  file: string
  value: string
  optional: boolean
}

function check (ok: boolean, field: string, value: unknown, rule: string): void {
  if (!ok) throw createError(ErrorCodes.INVALID_ARGUMENT, `limits.${field} must be ${rule}, got ${String(value)}`, { field, value: String(value) })
}

/**
 * Validates `limits` and converts them to kernel units: bytes, CFS quota per period (raised to
 * the kernel's 1 ms minimum), a process count.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the bad field
 */
export function toKernelLimits (limits: SandboxLimits, cpuPeriodUs: number = CgroupDefaults.cpuPeriodUs): KernelLimits {
  const { memoryMiB = 0, cpus = 0, pids = 0 } = limits
  check(Number.isFinite(memoryMiB) && memoryMiB >= 0, 'memoryMiB', memoryMiB, 'a finite number >= 0')
  check(Number.isFinite(cpus) && cpus >= 0, 'cpus', cpus, 'a finite number >= 0')
  check(Number.isSafeInteger(pids) && pids >= 0, 'pids', pids, 'an integer >= 0')
  return {
    memoryBytes: memoryMiB > 0 ? Math.round(memoryMiB * MiB) : undefined,
    cpuQuotaUs: cpus > 0 ? Math.max(CgroupDefaults.minCpuQuotaUs, Math.round(cpus * cpuPeriodUs)) : undefined,
    cpuPeriodUs,
    pids: pids > 0 ? pids : undefined
  }
}

/** The controllers `limits` need (a limit on a controller the host lacks cannot be honoured). */
export function controllersNeeded (limits: KernelLimits): Controller[] {
  const out: Controller[] = []
  if (limits.memoryBytes !== undefined) out.push('memory')
  if (limits.cpuQuotaUs !== undefined) out.push('cpu')
  if (limits.pids !== undefined) out.push('pids')
  return out
}

/**
 * The writes that set `controller`'s limit in a group of a v1 or v2 hierarchy, in order.
 * Unlimited values are written too, so re-creating a group with new limits leaves no old one.
 */
export function planLimitWrites (controller: 'memory' | 'cpu' | 'pids', version: 1 | 2, limits: KernelLimits, opts: { oomGroup: boolean }): LimitWrite[] {
  const req = (file: string, value: string): LimitWrite => ({ file, value, optional: false })
  const opt = (file: string, value: string): LimitWrite => ({ file, value, optional: true })
  switch (controller) {
    case 'memory': {
      const bytes = limits.memoryBytes
      if (version === 2) {
        return [
          req('memory.max', bytes !== undefined ? String(bytes) : 'max'),
          // No swap beyond the limit (swap.max exists only with swap accounting).
          opt('memory.swap.max', bytes !== undefined ? '0' : 'max'),
          opt('memory.oom.group', opts.oomGroup ? '1' : '0')
        ]
      }
      // v1 demands memsw >= limit at every moment: lift memsw first, then set both to the same
      // value (memory + swap = memory: no swap). memsw exists only with swap accounting.
      return [
        opt('memory.memsw.limit_in_bytes', '-1'),
        req('memory.limit_in_bytes', bytes !== undefined ? String(bytes) : '-1'),
        opt('memory.memsw.limit_in_bytes', bytes !== undefined ? String(bytes) : '-1')
      ]
    }
    case 'cpu': {
      const quota = limits.cpuQuotaUs
      if (version === 2) return [req('cpu.max', `${quota !== undefined ? String(quota) : 'max'} ${limits.cpuPeriodUs}`)]
      return [req('cpu.cfs_period_us', String(limits.cpuPeriodUs)), req('cpu.cfs_quota_us', quota !== undefined ? String(quota) : '-1')]
    }
    case 'pids':
      return [req('pids.max', limits.pids !== undefined ? String(limits.pids) : 'max')]
  }
}
