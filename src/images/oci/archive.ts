/**
 * The outer archive (a `docker save` tar or an OCI image layout tar), read in place: one pass
 * lists its regular members with where their bytes start and their sha256, and later reads take
 * those byte ranges straight from the file. Nothing of it is extracted; its device nodes, fifos
 * and setuid bits are names in a list, never files. A compressed outer archive is decompressed
 * once, to a plain file in the private work directory, so its members can be read by offset.
 */
import { createHash } from 'node:crypto'
import { closeSync, createWriteStream, openSync, readSync } from 'node:fs'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Transform } from 'node:stream'
import { archiveError, type ArchiveLimits } from './defaults.js'
import { isDigest } from '../blob/index.js'
import { memberComponents, memberPaths, shown } from './paths.js'
import { forEachMember, openRange, sniff } from './stream.js'

/** A regular member of the outer archive. */
export interface ArchiveMember {
  name: string
  /** Where its bytes start in `ArchiveIndex.file`. */
  offset: number
  size: number
  /** `sha256:<hex>` of its bytes. */
  digest: string
}

export interface ArchiveIndex {
  /** The uncompressed tar the offsets are in. */
  file: string
  field: string
  limits: ArchiveLimits
  members: Map<string, ArchiveMember>
  /** Symlinks and hard links between members (`docker save` links a layer shared by two images). */
  aliases: Map<string, string>
}

/** Copies the decompressed archive to `to`, refusing past `maxTreeBytes`. */
async function decompressTo (archive: string, to: string, field: string, limits: ArchiveLimits): Promise<void> {
  let bytes = 0
  const bound = new Transform({
    transform (chunk: Buffer, _enc, done) {
      bytes += chunk.length
      if (bytes > limits.maxTreeBytes) done(archiveError(field, `the archive decompresses to more than ${limits.maxTreeBytes} bytes`))
      else done(null, chunk)
    }
  })
  await pipeline(openRange(archive, { start: 0 }, field, 'the archive'), bound, createWriteStream(to, { mode: 0o600, flags: 'wx' }))
}

/**
 * Lists the members of an image archive.
 * @param work a private directory for the decompressed copy, when the archive is compressed
 */
export async function indexArchive (archive: string, work: string, field: string, limits: ArchiveLimits): Promise<ArchiveIndex> {
  let file = archive
  if (sniff(archive) !== 'none') {
    file = join(work, 'archive.tar')
    await decompressTo(archive, file, field, limits)
  }
  const index: ArchiveIndex = { file, field, limits, members: new Map(), aliases: new Map() }
  const seen = new Set<string>()
  await forEachMember(openRange(file, { start: 0 }, field, 'the archive'), field, 'the archive', { ...limits, maxMembers: limits.maxArchiveMembers }, async (header, body) => {
    const { name: raw, linkname } = memberPaths(header)
    const parts = memberComponents(raw, field, limits)
    const name = parts.join('/')
    if (header.type === 'directory') return
    if (seen.has(name)) throw archiveError(field, `the archive holds ${shown(name)} twice`)
    seen.add(name)
    if (header.type === 'symlink' || header.type === 'link') {
      // A symlink is relative to its own directory; a hard link names a member from the top.
      const target = header.type === 'symlink' && !linkname.startsWith('/') ? [...parts.slice(0, -1), linkname].join('/') : linkname
      const resolved: string[] = []
      for (const c of target.split('/')) {
        if (c === '..') resolved.pop()
        else if (c !== '' && c !== '.') resolved.push(c)
      }
      index.aliases.set(name, resolved.join('/'))
      return
    }
    if (header.type !== 'file' && header.type !== 'contiguous-file') return // never read, never made
    if (header.byteOffset === undefined) throw archiveError(field, `the tar parser gave no offset for ${shown(name)}`)
    const hash = createHash('sha256')
    for await (const chunk of body) hash.update(chunk)
    index.members.set(name, { name, offset: header.byteOffset, size: header.size ?? 0, digest: `sha256:${hash.digest('hex')}` })
  })
  return index
}

/** The regular member called `name`, through the archive's own links; undefined when there is none. */
export function memberOf (index: ArchiveIndex, name: string): ArchiveMember | undefined {
  let n = name
  for (let hops = 0; hops <= index.limits.maxSymlinkHops; hops++) {
    const found = index.members.get(n)
    if (found !== undefined) return found
    const next = index.aliases.get(n)
    if (next === undefined) return undefined
    n = next
  }
  return undefined
}

/** Refuses a member whose bytes do not match the digest (and size) it is referred to by. */
export function verify (index: ArchiveIndex, m: ArchiveMember, digest: unknown, size: unknown, what: string): void {
  if (!isDigest(digest)) {
    throw archiveError(index.field, `${what} has digest ${JSON.stringify(digest)}: only sha256:<64 hex> digests are read`)
  }
  if (m.digest !== digest) throw archiveError(index.field, `${what} does not match its digest: ${digest} is named, the bytes are ${m.digest}`, { expected: digest, actual: m.digest })
  if (size !== undefined && size !== m.size) throw archiveError(index.field, `${what} is ${m.size} bytes, its descriptor says ${String(size)}`)
}

/** Reads a JSON member, refusing one over `maxJsonBytes` before reading it. */
export function readJson (index: ArchiveIndex, m: ArchiveMember): unknown {
  if (m.size > index.limits.maxJsonBytes) {
    throw archiveError(index.field, `${m.name} is ${m.size} bytes, more than the ${index.limits.maxJsonBytes} a JSON document may have`, { member: m.name, bytes: m.size })
  }
  const bytes = Buffer.alloc(m.size)
  const fd = openSync(index.file, 'r')
  try {
    let done = 0
    while (done < m.size) {
      const n = readSync(fd, bytes, done, m.size - done, m.offset + done)
      if (n === 0) throw archiveError(index.field, `${m.name} ends early`)
      done += n
    }
  } finally {
    closeSync(fd)
  }
  try {
    return JSON.parse(bytes.toString('utf8'))
  } catch (err) {
    throw archiveError(index.field, `${m.name} is not JSON: ${(err as Error).message}`)
  }
}
