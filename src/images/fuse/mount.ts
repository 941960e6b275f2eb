/**
 * Mounting and unmounting the FUSE file system with mount(8) and umount(8), and aborting a
 * connection through the kernel's fusectl file system when nobody will answer it any more.
 *
 * Node has no mount(2), so the descriptor of /dev/fuse is handed to mount(8) as its fd 3 and named
 * in the options (`fd=3`): the kernel ties the new mount to that open file, which stays ours after
 * mount(8) exits. `-i` keeps mount(8) from running a mount.fuse helper, which would want libfuse.
 *
 * Processes are always started asynchronously while the file system is served: umount(8) looks at
 * the mount point, and that lookup is a FUSE request only our event loop can answer.
 */
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseMountinfo, type MountEntry } from '../../backends/container/cgroups/index.js'
import { createError, ErrorCodes } from '../../errors.js'

export type { MountEntry }

/** The mounts of this process's mount namespace, in mount order. */
export function readMountinfo (): MountEntry[] {
  return parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8'))
}

/** The topmost mount at `path` (already canonical), if any. */
export function findMount (path: string): MountEntry | undefined {
  let found: MountEntry | undefined
  for (const m of readMountinfo()) if (m.mountPoint === path) found = m
  return found
}

/** The fusectl directory name of a FUSE connection: the kernel's dev_t of its superblock. */
export function connectionId (m: MountEntry): number {
  return m.major * 2 ** 20 + m.minor
}

export interface MountFuseOptions {
  /** The /dev/fuse descriptor. */
  fd: number
  /** Canonical mount point path. */
  mountpoint: string
  source: string
  subtype: string
  mountBin: string
  timeoutMs: number
}

/**
 * Mounts a FUSE file system on `mountpoint` served through `fd`: read-only, open to every user
 * (allow_other), permissions checked by the kernel from the modes we report (default_permissions).
 * @returns the new mount's mountinfo entry
 */
export async function mountFuse (o: MountFuseOptions): Promise<MountEntry> {
  const uid = process.getuid?.() ?? 0
  const gid = process.getgid?.() ?? 0
  const options = `fd=3,rootmode=40000,user_id=${uid},group_id=${gid},allow_other,default_permissions,ro`
  const args = ['-i', '-t', `fuse.${o.subtype}`, '-o', options, o.source, o.mountpoint]
  const result = await runWithFd(o.mountBin, args, o.fd, o.timeoutMs)
  if (result.code !== 0) {
    throw createError(ErrorCodes.INTERNAL, `mount of the layer file system on ${o.mountpoint} failed: ${result.output || `exit ${String(result.code)}`}`, { mountpoint: o.mountpoint, exitCode: result.code })
  }
  const entry = findMount(o.mountpoint)
  if (entry === undefined || entry.fsType !== `fuse.${o.subtype}`) {
    throw createError(ErrorCodes.INTERNAL, `mount(8) succeeded but ${o.mountpoint} is not a fuse.${o.subtype} mount`, { mountpoint: o.mountpoint })
  }
  return entry
}

/**
 * Unmounts `mountpoint` with umount(8).
 * @param lazy detach now even if busy (MNT_DETACH); the file system lives on until its last user
 * @returns undefined on success, else umount's message
 */
export async function umountFuse (mountpoint: string, lazy: boolean, umountBin: string, timeoutMs: number): Promise<string | undefined> {
  // -c: no canonicalization, so umount(8) does not resolve the path through the mount itself.
  const result = await runWithFd(umountBin, lazy ? ['-c', '-l', mountpoint] : ['-c', mountpoint], undefined, timeoutMs)
  return result.code === 0 ? undefined : (result.output || `exit ${String(result.code)}`)
}

/**
 * Aborts a FUSE connection: every request waiting on it, and every later one, fails at once
 * (ENOTCONN) instead of waiting for a server that will not answer. Synchronous, so the exit
 * hook can use it. Mounts fusectl on `fusectlDir` when it is not mounted yet.
 * @returns true when the abort was written
 */
export function abortConnectionSync (id: number, fusectlDir: string): boolean {
  const file = join(fusectlDir, String(id), 'abort')
  try {
    writeFileSync(file, '1')
    return true
  } catch { /* fusectl may not be mounted; the connection may be gone already */ }
  if (readMountinfo().some((m) => m.fsType === 'fusectl')) return false
  spawnSync('mount', ['-t', 'fusectl', 'fusectl', fusectlDir], { stdio: 'ignore', timeout: 5_000 })
  try {
    writeFileSync(file, '1')
    return true
  } catch {
    return false
  }
}

/** The canonical form of a mount point, checked to be a directory we can mount on. */
export function canonicalMountpoint (path: string): string {
  try {
    return realpathSync(path)
  } catch (err) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `mount point ${path} does not exist`, { mountpoint: path, errno: (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN' })
  }
}

/** Runs a command, optionally with `fd` as its descriptor 3; resolves with its exit code and output tail. */
function runWithFd (cmd: string, args: string[], fd: number | undefined, timeoutMs: number): Promise<{ code: number | null, output: string }> {
  return new Promise((resolve) => {
    const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'pipe', 'pipe']
    if (fd !== undefined) stdio.push(fd)
    const child = spawn(cmd, args, { stdio })
    let output = ''
    const take = (b: Buffer): void => { output = (output + b.toString()).slice(-2000) }
    child.stdout?.on('data', take)
    child.stderr?.on('data', take)
    const timer = setTimeout(() => {
      output += ` (killed after ${timeoutMs} ms)`
      child.kill('SIGKILL')
    }, timeoutMs)
    child.once('error', (err) => { clearTimeout(timer); resolve({ code: null, output: `${cmd} could not start: ${err.message}` }) })
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, output: output.trim() }) })
  })
}

/** Mounts to end if the process exits while they are still served: connection id → mount point. */
const live = new Map<number, { mountpoint: string, fusectlDir: string, umountBin: string }>()
let exitHookInstalled = false

/**
 * Makes sure the process can exit while this mount is live. Reader threads blocked in read(2)
 * on /dev/fuse would keep Node from ever finishing its exit (it joins its threads), so at exit
 * the connection is aborted, which wakes them, and the mount point detached.
 * @returns the function that forgets the mount once it is over
 */
export function guardAtExit (id: number, mountpoint: string, fusectlDir: string, umountBin: string): () => void {
  live.set(id, { mountpoint, fusectlDir, umountBin })
  if (!exitHookInstalled) {
    exitHookInstalled = true
    process.on('exit', () => {
      for (const [connection, m] of live) {
        // Abort first: with the connection gone umount(8) cannot block on a lookup nobody answers.
        abortConnectionSync(connection, m.fusectlDir)
        spawnSync(m.umountBin, ['-c', '-l', m.mountpoint], { stdio: 'ignore', timeout: 5_000 })
      }
      live.clear()
    })
  }
  return () => { live.delete(id) }
}
