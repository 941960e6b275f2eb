/**
 * What a VM is given for a spec (`vmShape`), and the keys VMs of one shape share: the warm
 * pool's (what a pooled VM must match to be handed out) and the template's (what a saved VM
 * must match to be restored: everything the guest was booted with).
 */
import { statSync } from 'node:fs'
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxSpec } from '../types.js'
import { MicrovmDefaults } from './defaults.js'
import type { GuestImage } from './guest/index.js'
import { templateKey } from './templates.js'

type Limits = NonNullable<SandboxSpec['limits']>

/** One VM's make: its layers (references and files) and what `limits` gives it. */
export interface VmShape {
  refs: string[]
  layers: string[]
  vcpus: number
  memoryMiB: number
  diskMiB: number
  pids: number
  /** The CPU quota of QEMU's cgroup (0: none). */
  cpus: number
}

/** The refusal of a create asking for what a VM cannot be given, naming the field. */
function badVmLimit (field: string, message: string): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, message, { field })
}

/**
 * What a VM is given for `limits`: vCPUs, guest memory, writable layer, processes.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the limit a VM cannot be given
 */
export function vmLimits (limits: Limits | undefined): Omit<VmShape, 'refs' | 'layers'> {
  const cpus = limits?.cpus ?? 0
  if (!Number.isFinite(cpus) || cpus < 0) throw badVmLimit('limits.cpus', `limits.cpus must be a number >= 0, got ${String(cpus)}`)
  // (0: no quota, for callers of the backend itself; the cluster always sends one.)
  if (cpus > 0 && cpus < MicrovmDefaults.minCpus) throw badVmLimit('limits.cpus', `a VM needs at least ${MicrovmDefaults.minCpus} CPUs to start in time, got ${cpus}`)
  const memoryMiB = limits?.memoryMiB !== undefined && limits.memoryMiB > 0 ? limits.memoryMiB : MicrovmDefaults.memoryMiB
  if (!Number.isInteger(memoryMiB) || memoryMiB < MicrovmDefaults.minMemoryMiB) {
    throw badVmLimit('limits.memoryMiB', `a VM needs at least ${MicrovmDefaults.minMemoryMiB} MiB of memory, got ${String(memoryMiB)}`)
  }
  const diskMiB = limits?.diskMiB ?? MicrovmDefaults.diskMiB
  if (!Number.isInteger(diskMiB) || diskMiB < 0) throw badVmLimit('limits.diskMiB', `limits.diskMiB must be a whole number >= 0, got ${String(diskMiB)}`)
  const pids = limits?.pids ?? MicrovmDefaults.pids
  if (!Number.isInteger(pids) || pids < 0) throw badVmLimit('limits.pids', `limits.pids must be a whole number >= 0, got ${String(pids)}`)
  const vcpus = Math.min(MicrovmDefaults.maxVcpus, Math.max(1, Math.ceil(cpus)))
  return { vcpus, memoryMiB, diskMiB, pids, cpus }
}

/** The warm pool's key: VMs of one key are interchangeable until handed out. */
export function poolKey (shape: Omit<VmShape, 'layers'>): string {
  return JSON.stringify({ refs: shape.refs, vcpus: shape.vcpus, memoryMiB: shape.memoryMiB, diskMiB: shape.diskMiB, pids: shape.pids, cpus: shape.cpus })
}

/**
 * The template's key: the guest (kernel, initramfs with its agent, module disk), each layer's
 * content (a digest names it; a file built here, such as busybox, by size and time), and all
 * the kernel was booted with. The cgroup's CPU quota is the host's business and not in it.
 */
export function templateKeyOf (shape: VmShape, guest: GuestImage, accel: string, extraCmdline: string | undefined): string {
  const layers = shape.refs.map((ref, i) => {
    if (ref.startsWith('sha256:')) return ref
    const st = statSync(shape.layers[i]!)
    return `${ref}:${st.size}:${st.mtimeMs}`
  })
  return templateKey({
    layers, vcpus: shape.vcpus, memoryMiB: shape.memoryMiB, diskMiB: shape.diskMiB, pids: shape.pids,
    kernel: guest.kernel, initrd: guest.initrd, modules: guest.modulesDisk ?? null, accel, extraCmdline: extraCmdline ?? '', qemu: MicrovmDefaults.qemuPath
  })
}
