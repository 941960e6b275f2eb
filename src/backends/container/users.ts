/**
 * Who a command runs as: `ExecOptions.user` turned into the uid and gid the agent takes. A name
 * is looked up in the sandbox's own /etc/passwd (read through the agent, so it is the file the
 * sandbox sees, whatever its layers put there); a number is taken as it is.
 */
import { createError, ErrorCodes } from '../../errors.js'

export const UserDefaults = {
  /** The most of /etc/passwd read for a lookup: a tenant's huge file costs the node no more. */
  maxPasswdBytes: 1024 * 1024,
  /** uid and gid stay below 2^32 - 1 (which stands for "no id" in the kernel). */
  maxId: 0xfffffffe
}

/** A user as a command runs as it. `home` is set when /etc/passwd names the user. */
export interface CommandUser { uid: number, gid: number, home?: string }

/** One /etc/passwd entry: name:password:uid:gid:gecos:home:shell. */
interface PasswdEntry { name: string, uid: number, gid: number, home: string }

function refuse (message: string): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, message, { field: 'user' })
}

function parsePasswd (text: string): PasswdEntry[] {
  const out: PasswdEntry[] = []
  for (const line of text.split('\n')) {
    const f = line.split(':')
    if (f.length < 7 || !/^\d+$/.test(f[2]!) || !/^\d+$/.test(f[3]!)) continue
    out.push({ name: f[0]!, uid: Number(f[2]), gid: Number(f[3]), home: f[5]! })
  }
  return out
}

function id (text: string): number {
  const n = Number(text)
  if (!Number.isSafeInteger(n) || n > UserDefaults.maxId) refuse(`user ids are at most ${UserDefaults.maxId}, not ${text}`)
  return n
}

/**
 * Resolves `user` in a sandbox.
 * @param user a name (`sandbox`), a uid (`1000`) or `uid:gid` (`1000:100`)
 * @param readPasswd reads the sandbox's /etc/passwd (at most `UserDefaults.maxPasswdBytes`); rejects when it has none
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `user` when it is malformed; WARREN_ERR_NOT_FOUND naming `user` when no such user exists
 */
export async function resolveUser (user: string, readPasswd: () => Promise<Uint8Array>): Promise<CommandUser> {
  const numeric = /^(\d{1,10})(?::(\d{1,10}))?$/.exec(user)
  if (numeric === null && !/^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}\$?$/.test(user)) {
    refuse(`user must be a name of [A-Za-z0-9._-] (at most 32), a uid, or uid:gid; not ${JSON.stringify(user.slice(0, 40))}`)
  }
  if (numeric !== null && numeric[2] !== undefined) return { uid: id(numeric[1]!), gid: id(numeric[2]) }
  let entries: PasswdEntry[] = []
  try {
    entries = parsePasswd(new TextDecoder().decode(await readPasswd()))
  } catch {
    // No /etc/passwd (or none readable): a number still works, a name cannot be found.
  }
  if (numeric !== null) {
    // A bare uid takes its group and home from /etc/passwd when listed there, else gid = uid.
    const uid = id(numeric[1]!)
    const entry = entries.find((e) => e.uid === uid)
    return entry !== undefined ? { uid, gid: entry.gid, home: entry.home } : { uid, gid: uid }
  }
  const entry = entries.find((e) => e.name === user)
  if (entry === undefined) throw createError(ErrorCodes.NOT_FOUND, `no user ${user} in the sandbox's /etc/passwd`, { field: 'user' })
  if (entry.uid > UserDefaults.maxId || entry.gid > UserDefaults.maxId) refuse(`user ${user} has an id out of range in /etc/passwd`)
  return { uid: entry.uid, gid: entry.gid, home: entry.home }
}
