/**
 * Whether this machine can run microVMs: QEMU, the agent that becomes the guest's init, root (for
 * cgroups and the host directories), and a guest kernel to be had (the operator's, one already
 * unpacked, or apt to fetch Debian's).
 */
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { ContainerDefaults } from '../container/defaults.js'
import { MicrovmDefaults } from './defaults.js'

/**
 * Why microVMs cannot run here, or undefined when they can.
 * @param guestDir where the guest's files are kept (a kernel unpacked there counts)
 * @param kernel the operator's kernel, when one is named
 */
export function microvmUnavailable (guestDir?: string, kernel?: string): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root'
  if (!existsSync(MicrovmDefaults.qemuPath)) return `no QEMU at ${MicrovmDefaults.qemuPath} (Debian qemu-system-x86; run npm run setup)`
  if (!existsSync(MicrovmDefaults.unsharePath)) return `no unshare at ${MicrovmDefaults.unsharePath} (Debian util-linux)`
  if (!existsSync(ContainerDefaults.agentPath)) return `no agent at ${ContainerDefaults.agentPath} (run npm run setup)`
  if (!existsSync('/usr/bin/mkfs.erofs')) return 'mkfs.erofs is missing (Debian erofs-utils)'
  if (kernel !== undefined) return existsSync(kernel) ? undefined : `no kernel at ${kernel}`
  const unpacked = guestDir !== undefined && existsSync(join(guestDir, 'kernel')) &&
    readdirSync(join(guestDir, 'kernel')).some((r) => existsSync(join(guestDir, 'kernel', r, '.complete')))
  if (unpacked) return undefined
  if (!existsSync('/usr/bin/apt-get') || !existsSync('/usr/bin/dpkg-deb')) return 'no guest kernel: apt-get and dpkg-deb are needed to fetch Debian\'s (or name one with --kernel)'
  if (!existsSync('/bin/busybox')) return 'busybox is missing (Debian busybox-static): it indexes the guest kernel\'s modules'
  return undefined
}
