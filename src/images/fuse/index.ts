/**
 * The layer file system: a FUSE file system written against /dev/fuse directly (no libfuse),
 * presenting each layer image as one read-only file whose bytes are fetched on demand through
 * the caller's `read`. EROFS then mounts such a file; only what a sandbox reads is ever fetched.
 *
 *   const fs = await mountLayerFs({ mountpoint, files: () => layers, read: (name, off, len) => … })
 *   …mount -t erofs <mountpoint>/<layer> <dir>…
 *   await fs.unmount()
 *
 * How it talks to the kernel, and the rules for the process serving it: README.md.
 */
import { writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import { openChannel } from './channel.js'
import { FuseDefaults, type FuseTunables } from './defaults.js'
import { LayerFileSystem } from './layer-fs.js'
import { abortConnectionSync, canonicalMountpoint, connectionId, findMount, guardAtExit, mountFuse, umountFuse } from './mount.js'
import { FUSE_MAJOR, Size } from './protocol.js'
import { FuseSession, type SessionInfo } from './session.js'
import type { LayerFs, LayerFsErrorContext, LayerFsStats, MountLayerFsOptions } from './types.js'

export { FuseDefaults, type FuseTunables } from './defaults.js'
export type { LayerFileInfo, LayerFileLookup, LayerFiles, LayerFs, LayerFsErrorContext, LayerFsStats, LayerRead, MountLayerFsOptions } from './types.js'

/**
 * Detaches a layer file system left on `mountpoint` by a server that died (it answers ENOTCONN
 * to everyone): its connection is aborted and the mount detached. Call it only when no live
 * server can be serving that mount point.
 * @returns true when there was one
 */
export async function clearStaleLayerFs (mountpoint: string, tunables: Partial<FuseTunables> = {}): Promise<boolean> {
  const t = { ...FuseDefaults, ...tunables }
  // Not realpath: on a dead FUSE mount that fails with ENOTCONN.
  const entry = findMount(resolve(mountpoint))
  if (entry === undefined || entry.fsType !== `fuse.${t.subtype}`) return false
  abortConnectionSync(connectionId(entry), t.fusectlDir)
  await umountFuse(entry.mountPoint, true, t.umountBin, t.mountTimeoutMs)
  return true
}

/**
 * Mounts a layer file system on `options.mountpoint` and waits until the kernel has completed
 * INIT, so the files can be used as soon as this resolves.
 *
 * Requests are answered on this process's event loop. So this process must never touch the
 * mount (or an EROFS mount of its files) with a synchronous call — readFileSync, statSync,
 * spawnSync of a command that reads it: the call blocks the one thread that would answer, and
 * the process deadlocks in the kernel. Asynchronous fs calls, and other processes, are fine.
 * @throws WarrenError UNSUPPORTED (no /dev/fuse, kernel protocol too old), INVALID_ARGUMENT (bad
 *         mount point or tunable), INTERNAL (mount(8) failed), TIMEOUT (no INIT in time)
 */
export async function mountLayerFs (options: MountLayerFsOptions): Promise<LayerFs> {
  const t = tunables(options)
  const mountpoint = canonicalMountpoint(options.mountpoint)
  const report = (err: WarrenError, context: LayerFsErrorContext): void => {
    try { options.onError?.(err, context) } catch { /* a failing logger must not break the file system */ }
  }
  const fs = new LayerFileSystem({ files: options.files, read: options.read, tunables: t, report })
  const channel = openChannel()
  const session = new FuseSession(channel, fs, {
    init: { maxWrite: t.maxWrite, maxPages: t.maxPages, maxReadahead: t.maxReadahead, maxBackground: t.maxBackground, congestionThreshold: t.congestionThreshold },
    interruptMemoryMs: t.interruptMemoryMs,
    interruptPollMs: t.interruptPollMs,
    onError: (err) => report(err, { op: typeof err.details?.op === 'string' ? err.details.op : 'FUSE' })
  })

  let entry
  try {
    entry = await mountFuse({ fd: channel.fd, mountpoint, source: t.source, subtype: t.subtype, mountBin: t.mountBin, timeoutMs: t.mountTimeoutMs })
  } catch (err) {
    // Closing the unused descriptor ends the connection; a mount left behind (mount(8) timed out
    // after mounting) is then dead and only needs detaching.
    channel.closeUnstarted()
    if (findMount(mountpoint)?.fsType === `fuse.${t.subtype}`) await umountFuse(mountpoint, true, t.umountBin, t.mountTimeoutMs)
    throw err
  }
  const id = connectionId(entry)
  const forget = guardAtExit(id, mountpoint, t.fusectlDir, t.umountBin)
  // The kernel refuses reads into a buffer that could not hold the largest WRITE plus headers.
  session.start(t.readers, Math.max(Size.MIN_READ_BUFFER, Size.IN_HEADER + Size.WRITE_IN + t.maxWrite))
  const closed = session.closed.then(() => { forget() })

  let info: SessionInfo
  try {
    info = await withDeadline(session.ready, t.mountTimeoutMs, `the kernel did not start the FUSE session on ${mountpoint}`)
  } catch (err) {
    abortConnectionSync(id, t.fusectlDir)
    await umountFuse(mountpoint, true, t.umountBin, t.mountTimeoutMs)
    await withDeadline(closed, t.mountTimeoutMs, 'the FUSE connection did not end').catch(() => undefined)
    throw err
  }
  if (t.readAheadKb > 0) setReadahead(entry.major, entry.minor, t.readAheadKb)

  let unmounting: Promise<void> | undefined
  return {
    mountpoint,
    protocol: { major: FUSE_MAJOR, minor: info.minor, kernelMinor: info.kernelMinor, maxPages: info.maxPages },
    closed,
    stats (): LayerFsStats {
      const s = session.stats()
      return { requests: s.requests, ...fs.counters, interrupted: s.interrupted, interruptsDeferred: s.interruptsDeferred, inFlight: s.inFlight, maxInFlight: s.maxInFlight }
    },
    unmount () {
      unmounting ??= unmount(session.ended, mountpoint, id, closed, t)
      return unmounting
    }
  }
}

/** Unmounts; lazily when busy, then serves the last users for a while before aborting. */
async function unmount (alreadyEnded: boolean, mountpoint: string, id: number, closed: Promise<void>, t: FuseTunables): Promise<void> {
  if (!alreadyEnded) {
    const busy = await umountFuse(mountpoint, false, t.umountBin, t.mountTimeoutMs)
    if (busy !== undefined) await umountFuse(mountpoint, true, t.umountBin, t.mountTimeoutMs)
    const ended = await withDeadline(closed, busy === undefined ? t.mountTimeoutMs : t.unmountLingerMs, '').then(() => true, () => false)
    if (!ended) abortConnectionSync(id, t.fusectlDir)
  }
  await withDeadline(closed, t.mountTimeoutMs, `the FUSE connection of ${mountpoint} did not end after unmount and abort`)
}

/** Sets the mount's readahead window; best effort (a kernel without the knob reads in 128 KiB). */
function setReadahead (major: number, minor: number, kb: number): void {
  try { writeFileSync(`/sys/class/bdi/${major}:${minor}/read_ahead_kb`, String(kb)) } catch { /* keep the default */ }
}

/** The tunables in force: the defaults, overridden by what the options set. */
function tunables (options: MountLayerFsOptions): FuseTunables {
  const t: FuseTunables = { ...FuseDefaults }
  for (const key of Object.keys(FuseDefaults) as Array<keyof FuseTunables>) {
    const v = options[key]
    if (v !== undefined) (t as Record<keyof FuseTunables, unknown>)[key] = v
  }
  const positive = ['readTimeoutMs', 'mountTimeoutMs', 'readers', 'maxWrite', 'maxPages', 'maxReadahead', 'maxBackground', 'congestionThreshold', 'blksize'] as const
  for (const key of positive) {
    if (!Number.isSafeInteger(t[key]) || t[key] <= 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `${key} must be a positive integer, not ${String(t[key])}`, { field: key })
  }
  if (t.maxPages > 65535 || t.maxBackground > 65535 || t.congestionThreshold > 65535) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, 'maxPages, maxBackground and congestionThreshold are 16-bit fields', { field: 'maxPages' })
  }
  if (!/^[a-z0-9_-]+$/i.test(t.subtype)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad subtype ${t.subtype}`, { field: 'subtype' })
  if (t.source === '' || /[\s,]/.test(t.source)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad source ${t.source}`, { field: 'source' })
  return t
}

/** `promise`, or a TIMEOUT error after `ms`. */
function withDeadline<T> (promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(createError(ErrorCodes.TIMEOUT, `${what} (after ${ms} ms)`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}
