/**
 * File access the way cgroupfs wants it: one value per write(2), no O_CREAT (interface files
 * exist or the kernel lacks the feature), and errors turned into WarrenErrors with stable codes.
 */
import { constants } from 'node:fs'
import { open, readdir, readFile, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes, type WarrenError } from '../../../errors.js'

/** The errno name of a Node fs error (`ENOENT` …), or undefined. */
export function errnoOf (err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code
}

/**
 * Writes `value` to a cgroup interface file in a single write(2): the kernel parses each write
 * as one whole value. Opened write-only, since many files (cgroup.kill) have no read side.
 */
export async function writeValue (path: string, value: string): Promise<void> {
  const fh = await open(path, constants.O_WRONLY)
  try {
    await fh.write(value)
  } finally {
    await fh.close()
  }
}

/** A file's text, or undefined when it does not exist (the group or the feature is not there). */
export async function readOptional (path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENODEV') return undefined
    throw err
  }
}

/** A file holding one number (`memory.current`), or undefined when absent or not a number (`max`). */
export async function readNumber (path: string): Promise<number | undefined> {
  const text = await readOptional(path)
  if (text === undefined) return undefined
  const n = Number(text.trim())
  return Number.isFinite(n) ? n : undefined
}

/** Parses flat-keyed files (`memory.events`, `cpu.stat`, `memory.oom_control`): `key value` lines. */
export function keyValues (text: string | undefined): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of (text ?? '').split('\n')) {
    const [k, v] = line.trim().split(/\s+/)
    if (k !== undefined && k !== '' && v !== undefined) out.set(k, Number(v))
  }
  return out
}

/** Names of the groups directly below `dir`; none when `dir` is gone. */
export async function childGroups (dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name)
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return []
    throw err
  }
}

/**
 * Every process in `dir`'s group and the groups below it (a sandbox may make its own through
 * its cgroup namespace). Empty when the group is gone.
 */
export async function listPids (dir: string): Promise<number[]> {
  const own = await readOptional(join(dir, 'cgroup.procs'))
  if (own === undefined) return []
  const pids = own.split('\n').filter((l) => l !== '').map(Number)
  for (const child of await childGroups(dir)) pids.push(...await listPids(join(dir, child)))
  return pids
}

/**
 * Removes a group and the groups below it, deepest first. EBUSY (a task is still leaving) is
 * retried until `deadline`; a group already gone counts as removed.
 */
export async function removeGroupTree (dir: string, deadline: number, pollMs: number): Promise<void> {
  for (const child of await childGroups(dir)) await removeGroupTree(join(dir, child), deadline, pollMs)
  for (;;) {
    try {
      await rmdir(dir)
      return
    } catch (err) {
      const code = errnoOf(err)
      if (code === 'ENOENT') return
      if (code !== 'EBUSY') throw fsError(err, 'remove', dir)
      if (Date.now() > deadline) {
        throw createError(ErrorCodes.TIMEOUT, `cgroup ${dir} is still busy (a process has not left it)`, { path: dir, errno: code })
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs))
    }
  }
}

/**
 * Turns an fs error on cgroupfs into a WarrenError: no permission or no such interface file
 * means the host does not support what was asked (UNSUPPORTED); EINVAL means the kernel refused
 * the value (INVALID_ARGUMENT); anything else (EBUSY included: a limit below current use,
 * processes in an inner v2 group) is INTERNAL. `details` keep path, errno and value.
 */
export function fsError (err: unknown, what: string, path: string, value?: string): WarrenError {
  const errno = errnoOf(err) ?? 'unknown'
  const details = { path, errno, ...(value !== undefined ? { value } : {}) }
  const message = `cgroup ${what} ${path}${value !== undefined ? ` = ${JSON.stringify(value)}` : ''}: ${err instanceof Error ? err.message : String(err)}`
  switch (errno) {
    case 'EACCES': case 'EPERM': case 'EROFS':
      return createError(ErrorCodes.UNSUPPORTED, `${message} (cgroups need root or a delegated hierarchy)`, details)
    case 'ENOENT': case 'EOPNOTSUPP':
      return createError(ErrorCodes.UNSUPPORTED, `${message} (the kernel lacks this cgroup feature)`, details)
    case 'EINVAL': case 'ERANGE':
      return createError(ErrorCodes.INVALID_ARGUMENT, message, details)
    default:
      return createError(ErrorCodes.INTERNAL, message, details)
  }
}
