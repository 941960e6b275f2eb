/**
 * The QEMU command line of one microVM, as a pure function of what the VM is, so it can be
 * checked without starting anything. The machine is `-M microvm` (virtio-mmio devices, no PCI,
 * no firmware beyond qboot) with `-nodefaults`: every device is one asked for here.
 *
 *   disks    each layer read-only as virtio-blk, serial `warren-l<i>` (0 = bottom); the kernel's
 *            module tree as `warren-mods`; the guest finds them by serial, not by probe order
 *   agent    virtio-serial port `warren.agent` on a chardev socket the node connects to
 *   egress   a second port, `warren.egress`: the guest's relay of 127.0.0.1:3128, multiplexed
 *            (relay-mux.c); every VM has it, used only when its sandbox is given egress
 *   memory   the backend `mem`: anonymous, or a file: a template's RAM (shared: the file is the RAM) or a restored
 *            VM's (private: the file's pages shared until the guest writes them), `-incoming`
 *   control  QMP on a second socket; the console (ttyS0) on a third, read during boot only
 *   network  none (`-nic none`): the guest has loopback only
 *   jail     once set up, an empty root and a host user of its own (qemu-jail.ts)
 */
import { existsSync, readFileSync } from 'node:fs'
import { defaultCpu } from './accel.js'
import { MicrovmDefaults } from './defaults.js'

/** What one VM is made of. */
export interface VmPlan {
  id: string
  /** Hostname inside. */
  hostname: string
  /** EROFS images, bottom first. */
  layers: readonly string[]
  kernel: string
  initrd: string
  modulesDisk?: string
  vcpus: number
  memoryMiB: number
  /** The guest's writable layer (a tmpfs); 0: unbounded (up to its memory). */
  diskMiB: number
  /** Processes the guest may have; 0: unbounded. */
  pids: number
  accel: 'kvm' | 'tcg'
  /** QEMU's `-cpu` (default `defaultCpu(accel)`; under KVM what `chooseAccel` found to work). */
  cpu?: string
  /** Under TCG: the host's TSC rate, so the guest need not calibrate it (that fails on a busy host). */
  tscKhz?: number
  agentSocket: string
  egressSocket: string
  qmpSocket: string
  consoleSocket: string
  pidFile: string
  /** Kernel parameters added at the end (e.g. `warren.debug=1`). */
  extraCmdline?: string
  /** Guest RAM as this file, shared (written through: a template) or private (copy-on-write: a restore); the launcher's is always `RAM_PATH`. */
  memoryFile?: { path: string, share: boolean }
  /** Wait for the VM's state over QMP (`migrate-incoming`) instead of booting. */
  incoming?: boolean
  /** Once set up, chroot into `dir` and become `uid` (its group the same number): qemu-jail.ts. */
  jail?: { dir: string, uid: number }
}

/** A value inside a QEMU option list, where a comma separates options unless doubled. */
function opt (value: string): string {
  return value.replace(/,/g, ',,')
}

/** The kernel command line: quiet, powering off on panic, and the agent's parameters. */
export function kernelCmdline (plan: VmPlan): string {
  const parts = ['console=ttyS0', 'quiet', 'panic=-1', 'reboot=triple']
  // Without kvmclock (TCG) the kernel calibrates the TSC against the PIT, which a starved vCPU
  // thread gets wrong, leaving no clock at all; told the rate, it skips that.
  if (plan.accel === 'tcg' && plan.tscKhz !== undefined) parts.push(`tsc_early_khz=${plan.tscKhz}`, 'tsc=reliable', 'no_timer_check')
  parts.push(`warren.id=${plan.hostname}`, `warren.layers=${plan.layers.length}`, `warren.disk=${plan.diskMiB}`, `warren.pids=${plan.pids}`)
  if (plan.modulesDisk !== undefined) parts.push('warren.mods=1')
  if (plan.extraCmdline !== undefined && plan.extraCmdline !== '') parts.push(plan.extraCmdline)
  return parts.join(' ')
}

/** QEMU's arguments (after the program name) for `plan`. */
export function qemuArgs (plan: VmPlan): string[] {
  const args = [
    '-name', `warren-${plan.id}`,
    // Every VM's RAM is the memory backend `mem`: a memory snapshot names its RAM block, and a
    // VM restored from it must have one of that name, whether its source booted or was restored.
    '-M', 'microvm,x-option-roms=off,memory-backend=mem',
    '-accel', plan.accel === 'tcg' ? `tcg,tb-size=${MicrovmDefaults.tcgCacheMiB}` : 'kvm',
    '-cpu', plan.cpu ?? defaultCpu(plan.accel),
    '-smp', String(plan.vcpus),
    '-m', `${plan.memoryMiB}M`,
    '-nodefaults', '-no-user-config', '-display', 'none', '-nic', 'none', '-no-reboot',
    // QEMU's own seccomp filter, in place before it reads a guest's byte: no obsolete calls, no
    // scheduler control, and no new process, namespace or exec (spawn=deny: a QEMU a guest took
    // over can start nothing; hence no -daemonize, launcher.ts). (elevateprivileges=deny would
    // forbid the -runas below, which happens after the filter.)
    '-sandbox', 'on,obsolete=deny,resourcecontrol=deny,spawn=deny',
    '-kernel', plan.kernel,
    '-initrd', plan.initrd,
    '-append', kernelCmdline(plan)
  ]
  // merge=on: the guest's RAM is offered to the host's same-page merging (KSM), which only the
  // host's /sys/kernel/mm/ksm/run turns on (seen here: without it QEMU 7.2 left the RAM unmarked).
  if (plan.memoryFile !== undefined) {
    args.push('-object', `memory-backend-file,id=mem,size=${plan.memoryMiB}M,mem-path=${opt(plan.memoryFile.path)},share=${plan.memoryFile.share ? 'on' : 'off'},merge=on`)
  } else {
    args.push('-object', `memory-backend-ram,id=mem,size=${plan.memoryMiB}M,merge=on`)
  }
  const disk = (file: string, id: string, serial: string): void => {
    args.push('-drive', `file=${opt(file)},format=raw,readonly=on,if=none,id=${id}`, '-device', `virtio-blk-device,drive=${id},serial=${serial}`)
  }
  plan.layers.forEach((layer, i) => disk(layer, `l${i}`, `warren-l${i}`))
  if (plan.modulesDisk !== undefined) disk(plan.modulesDisk, 'mods', 'warren-mods')
  args.push(
    // Free page reporting: pages the guest frees once the driver runs go back to the host
    // instead of staying charged to QEMU (~20 MiB of an idle guest here; what the kernel freed
    // before, its decompression scratch above all, stays).
    '-device', 'virtio-balloon-device,free-page-reporting=on',
    '-device', 'virtio-serial-device,max_ports=3',
    '-chardev', `socket,id=agent,path=${opt(plan.agentSocket)},server=on,wait=off`,
    '-device', 'virtserialport,chardev=agent,name=warren.agent,id=agent0',
    '-chardev', `socket,id=egress,path=${opt(plan.egressSocket)},server=on,wait=off`,
    '-device', 'virtserialport,chardev=egress,name=warren.egress,id=egress0',
    '-chardev', `socket,id=qmp,path=${opt(plan.qmpSocket)},server=on,wait=off`,
    '-mon', 'chardev=qmp,mode=control',
    '-chardev', `socket,id=con,path=${opt(plan.consoleSocket)},server=on,wait=off`,
    '-serial', 'chardev:con',
    '-pidfile', plan.pidFile
  )
  if (plan.incoming === true) args.push('-incoming', 'defer')
  if (plan.jail !== undefined) args.push('-chroot', plan.jail.dir, '-runas', `${plan.jail.uid}:${plan.jail.uid}`)
  return args
}

/**
 * The host's TSC rate in kHz, which a TCG guest's TSC runs at (QEMU reads the host's), from
 * /proc/cpuinfo; undefined where it says none.
 */
export function hostTscKhz (): number | undefined {
  if (!existsSync('/proc/cpuinfo')) return undefined
  const mhz = /^cpu MHz\s*:\s*([0-9.]+)/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]
  const khz = mhz !== undefined ? Math.round(Number(mhz) * 1000) : NaN
  return Number.isFinite(khz) && khz > 0 ? khz : undefined
}
