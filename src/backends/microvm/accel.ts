/**
 * Which accelerator and CPU model QEMU runs guests with on this host: KVM where /dev/kvm opens
 * and a QEMU started with it actually gets its vCPUs set up, else TCG (slower, but needs
 * nothing of the host).
 *
 * /dev/kvm opening is not enough. Nested in another hypervisor (a cloud VM, a Firecracker
 * guest), KVM may refuse an MSR that `-cpu host` copies from the real CPU: seen here, QEMU 7.2
 * aborted at start on MSR 0x10a (IA32_ARCH_CAPABILITIES) with "failed to set MSR". So each CPU
 * model is tried once, with the machine created and its vCPUs reset but never run (`-S`, then
 * QMP `quit`): `host` first, then `host` without that MSR (the guest then assumes the CPU has
 * every flaw that MSR would have cleared, and turns its mitigations on: slower, never less safe).
 *
 * Nor is a KVM that sets up vCPUs always one that runs a guest: where the host's KVM is PVM
 * (the `kvm_pvm` module, nested virtualization without hardware support), only guest kernels
 * built for PVM run; seen here, Debian's printed its real-mode banner and hung. Such a host runs
 * VMs under TCG unless the operator asks for KVM (`accel: 'kvm'`) with a kernel of that kind.
 */
import { spawnSync } from 'node:child_process'
import { accessSync, constants, existsSync } from 'node:fs'
import { MicrovmDefaults } from './defaults.js'

/** The accelerator and the `-cpu` model a VM of this host runs with. */
export interface AccelChoice {
  accel: 'kvm' | 'tcg'
  cpu: string
  /** Why KVM is not used, when /dev/kvm is there but no CPU model worked. */
  kvmRefused?: string
}

/** CPU models tried under KVM, in order. */
const KVM_CPUS = ['host', 'host,-arch-capabilities'] as const

/** How long one try may take (QEMU starts and quits in well under a second). */
const PROBE_TIMEOUT_MS = 10_000

const probed = new Map<string, AccelChoice>()

/** The CPU model a given accelerator runs with when nothing was probed: `host` for KVM, `max` for TCG. */
export function defaultCpu (accel: 'kvm' | 'tcg'): string {
  return accel === 'kvm' ? 'host' : 'max'
}

/**
 * The accelerator and CPU model for VMs started with `qemuPath`, found once per process (a few
 * hundred ms of QEMU starts the first time where /dev/kvm is there; nothing otherwise).
 */
export function chooseAccel (qemuPath: string = MicrovmDefaults.qemuPath): AccelChoice {
  const known = probed.get(qemuPath)
  if (known !== undefined) return known
  const choice = probe(qemuPath)
  probed.set(qemuPath, choice)
  return choice
}

function probe (qemuPath: string): AccelChoice {
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK)
  } catch {
    return { accel: 'tcg', cpu: defaultCpu('tcg') }
  }
  if (existsSync('/sys/module/kvm_pvm') && !existsSync('/sys/module/kvm_intel') && !existsSync('/sys/module/kvm_amd')) {
    return { accel: 'tcg', cpu: defaultCpu('tcg'), kvmRefused: 'this host\'s KVM is PVM (kvm_pvm), which runs only guest kernels built for it' }
  }
  let why = ''
  for (const cpu of KVM_CPUS) {
    const r = spawnSync(qemuPath, [
      '-M', 'microvm,x-option-roms=off', '-accel', 'kvm', '-cpu', cpu, '-m', '128M',
      '-nodefaults', '-no-user-config', '-display', 'none', '-S', '-qmp', 'stdio'
    ], { input: '{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n', timeout: PROBE_TIMEOUT_MS, encoding: 'utf8', env: {} })
    if (r.status === 0 && r.stdout.includes('"SHUTDOWN"')) return { accel: 'kvm', cpu }
    why = (r.error?.message ?? r.stderr.trim().split('\n')[0]) || `QEMU exited with ${r.status ?? r.signal}`
  }
  return { accel: 'tcg', cpu: defaultCpu('tcg'), kvmRefused: why }
}
