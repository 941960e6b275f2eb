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
 * Users are handed out from `MicrovmDefaults.qemuUsers`, each leased in a file that every node
 * agent of the host sees (`takeQemuUser`), so no two live VMs on the host share one; a restarted
 * node holds its adopted VMs' users.
 * A node that is not root has no user to give: its QEMU runs as the node's own user, unjailed.
 */
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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

let next = randomInt(MicrovmDefaults.qemuUsers.count)

/** The lease of `uid`: a file in `MicrovmDefaults.qemuUserLeases` holding its VM's host directory. */
function leasePath (uid: number): string {
  return join(MicrovmDefaults.qemuUserLeases, String(uid))
}

/** The host directory of the VM that holds `uid`, or undefined when no VM does. */
function leaseHolder (uid: number): string | undefined {
  try {
    return readFileSync(leasePath(uid), 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/** Creates `uid`'s lease for `owner`, unless a VM holds it already: true when it is now `owner`'s. */
function lease (uid: number, owner: string): boolean {
  mkdirSync(MicrovmDefaults.qemuUserLeases, { recursive: true, mode: 0o700 })
  try {
    // O_EXCL: of two node agents asking for one user at once, one gets it.
    writeFileSync(leasePath(uid), owner, { flag: 'wx', mode: 0o600 })
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return leaseHolder(uid) === owner
    throw err
  }
}

/**
 * A user no live VM on this host has, for a new VM's QEMU (its group is the same number), leased
 * to `owner`, the VM's host directory (which must exist: a lease names it). Users are leased in
 * files every node agent of the host sees, so two agents never give one user to two VMs; a lease
 * is given back when its VM is destroyed, by its node or by the node that restarts and reclaims
 * it. (One whose node never comes back stays until the host reboots, /run being memory: a user
 * fewer, of a million.)
 * @throws WARREN_ERR_NO_CAPACITY when every user of the range is taken
 */
export function takeQemuUser (owner: string): number {
  const { first, count } = MicrovmDefaults.qemuUsers
  for (let tried = 0; tried < count; tried++) {
    const uid = first + (next % count)
    next = (next + 1) % count
    if (lease(uid, owner)) return uid
  }
  throw createError(ErrorCodes.NO_CAPACITY, `all ${count} QEMU users are taken by live VMs`, { resource: 'qemuUsers' })
}

/**
 * Keeps `uid` leased to `owner`: an adopted VM's, which must not be handed out again (a record
 * from before leases has none yet). A user leased to another VM stays that VM's (a record copied
 * or left behind names it too).
 */
export function holdQemuUser (uid: number, owner: string): void {
  lease(uid, owner)
}

/** True when `uid` is `owner`'s, or nobody's: only then may ending that VM end what runs as it. */
export function mayEndQemuUser (uid: number, owner: string): boolean {
  const holder = leaseHolder(uid)
  return holder === undefined || holder === owner
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

/** Gives `owner`'s user back once its QEMU and all it started are gone (`endQemuUser`); another VM's stays. */
export function releaseQemuUser (uid: number | undefined, owner: string): void {
  if (uid !== undefined && leaseHolder(uid) === owner) rmSync(leasePath(uid), { force: true })
}
