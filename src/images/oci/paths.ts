/**
 * Member paths as bytes. A tar member's name is any bytes but `/` and NUL: a backslash, a
 * newline, invalid UTF-8 are all legitimate. They are carried as "byte strings" (one char per
 * byte, latin1) from the tar header to the file system call, so no name is escaped, decoded or
 * changed on the way, and a whiteout names exactly the file it deletes.
 */
import type { Header } from 'tar-stream'
import { archiveError, type ArchiveLimits } from './defaults.js'

/** A path as bytes, one char per byte. */
export type BytePath = string

/** The bytes of a byte path, for a file system call. */
export const fsPath = (p: BytePath): Buffer => Buffer.from(p, 'latin1')

/** A host path (UTF-8, as Node gives it) as a byte path. */
export const bytePath = (host: string): BytePath => Buffer.from(host, 'utf8').toString('latin1')

/** A byte path for a human: UTF-8 where it is, JSON-escaped so a newline shows as `\n`. */
export const shown = (p: BytePath): string => JSON.stringify(Buffer.from(p, 'latin1').toString('utf8'))

/**
 * The member's name and link target as bytes. tar-stream is asked for latin1 (byte-exact) names;
 * a pax header's path is UTF-8 by the standard, and tar-stream decodes it so: encode it back.
 */
export function memberPaths (header: Header): { name: BytePath, linkname: BytePath } {
  const pax = (header.pax ?? {}) as Record<string, string | undefined>
  return {
    name: pax.path !== undefined ? bytePath(pax.path) : header.name,
    linkname: pax.linkpath !== undefined ? bytePath(pax.linkpath) : (header.linkname ?? '')
  }
}

/**
 * A member name as the components of a path inside the root. A leading `/` is dropped (tar does
 * the same: an image's `/etc` is its own), `.` and empty components vanish, and a `..` anywhere
 * is refused: an archive that names a path above its root is hostile or broken.
 * @returns the components; none for the root itself
 */
export function memberComponents (name: BytePath, field: string, limits: ArchiveLimits): string[] {
  if (name.length > limits.maxPathBytes) throw archiveError(field, `member name of ${name.length} bytes is longer than ${limits.maxPathBytes}`)
  const parts = name.split('/').filter((c) => c !== '' && c !== '.')
  if (parts.includes('..')) throw archiveError(field, `member ${shown(name)} names a path outside its root`, { member: shown(name) })
  return parts
}
