/**
 * What a VM's QEMU is left with once its machine is set up: QEMU opens every file and socket it
 * needs as root, then, just before the guest runs, chroots into an empty directory of its own
 * (`-chroot`) and becomes a host user of its own (`-runas uid:gid`), with no capabilities and
 * its seccomp filter on. It starts in a network and an IPC namespace of its own (`jailCommand`).
 * A guest that took QEMU over is then a user that owns nothing, in a root with nothing in it,
 * on a network with nothing on it: it reaches no host file, no host port or abstract socket
 * (the node's API on loopback included) and no host SysV IPC, and it cannot signal, trace or
 * read another VM's QEMU, since no two live VMs share a user. (It keeps the descriptors QEMU opened before:
 * a VM restored from a template holds the template's RAM read-write, as QEMU 7.2 opens it, which
 * is why that RAM is sealed against every write first: guest-ram.ts.)
 *
 * After that QEMU opens nothing by path: a saved state comes in on a descriptor it was started
 * with (`STATE_FD`, vm-state.ts) and goes out to a socket the node puts in the jail for the save.
 * Users are handed out per process from `MicrovmDefaults.qemuUsers`, starting at a random place
 * so that two node agents on one host seldom meet; a restarted node holds its adopted VMs' users.
 * A node that is not root has no user to give: its QEMU runs as the node's own user, unjailed.
 */
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { MicrovmDefaults } from './defaults.js'

/** The empty directory a VM's QEMU is chrooted into, inside the VM's host directory. */
export function jailDir (vmDir: string): string {
  return join(vmDir, 'root')
}

/**
 * A file in the VM's jail, as the host names it and as its QEMU does (a QEMU that is not
 * jailed, `uid` undefined, sees the host's names).
 */
export function jailPath (vm: { dir: string, uid?: number | undefined }, name: string): { host: string, qemu: string } {
  const host = join(jailDir(vm.dir), name)
  return { host, qemu: vm.uid === undefined ? host : `/${name}` }
}

/** True where QEMU can be jailed: only root can chroot and give up its user. */
export function canJail (): boolean {
  return process.getuid?.() === 0
}

/**
 * The command that starts a jailed QEMU: `unshare` execs it (same PID, so the pid file and the
 * journal name QEMU) in a new network namespace, which has only a loopback that is down, and a
 * new IPC namespace. QEMU needs no network: its sockets are files, found by path from any
 * namespace, and the guest has no NIC. (No mount namespace: each would copy the host's whole
 * mount table, every sandbox's mounts in it, and pin those it copied; the chroot holds without
 * CAP_SYS_CHROOT.)
 */
export function jailCommand (qemu: string, args: readonly string[]): [string, string[]] {
  return [MicrovmDefaults.unsharePath, ['--net', '--ipc', '--', qemu, ...args]]
}

/** Each user in use, and the VM (its id) it is given to. */
const inUse = new Map<number, string>()
let next = randomInt(MicrovmDefaults.qemuUsers.count)

/**
 * A user no live VM of this process has, for a new VM's QEMU (its group is the same number).
 * @throws WARREN_ERR_NO_CAPACITY when every user of the range is taken
 */
export function takeQemuUser (vmId: string): number {
  const { first, count } = MicrovmDefaults.qemuUsers
  for (let tried = 0; tried < count; tried++) {
    const uid = first + next
    next = (next + 1) % count
    if (!inUse.has(uid)) {
      inUse.set(uid, vmId)
      return uid
    }
  }
  throw createError(ErrorCodes.NO_CAPACITY, `all ${count} QEMU users are taken by live VMs`, { resource: 'qemuUsers' })
}

/**
 * Marks a user taken by `vmId`: an adopted VM's, which a restarted node must not hand out again.
 * A user already held stays its first holder's (a record copied or left behind names it too).
 */
export function holdQemuUser (uid: number, vmId: string): void {
  if (!inUse.has(uid)) inUse.set(uid, vmId)
}

/** True when `uid` is `vmId`'s, or nobody's: only then may ending that VM end what runs as it. */
export function mayEndQemuUser (uid: number, vmId: string): boolean {
  const holder = inUse.get(uid)
  return holder === undefined || holder === vmId
}

/**
 * Ends every process running as `uid` (`kill -9 -1` as that user): a QEMU a guest took over may
 * have forked, and its children must not outlive it into the next VM given the user.
 */
export function endQemuUser (uid: number): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', 'kill -9 -1 2>/dev/null; exit 0'], { uid, gid: uid, stdio: 'ignore', env: {} })
    child.once('error', () => resolve())
    child.once('close', () => resolve())
  })
}

/** Gives `vmId`'s user back once its QEMU and all it started are gone (`endQemuUser`); another VM's stays. */
export function releaseQemuUser (uid: number | undefined, vmId: string): void {
  if (uid !== undefined && inUse.get(uid) === vmId) inUse.delete(uid)
}
