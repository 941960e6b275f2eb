/**
 * The sink of a tree upload: a tar unpacked into a directory of the sandbox as its bytes arrive,
 * each member written with the backend's file operations (so it works in any image: nothing in
 * the sandbox needs a `tar`). Modes are kept; symlinks are made as symlinks, and no member may
 * be written through a symlink this tar made (nor replace one), so a tar cannot use its own
 * links to reach outside the target directory. Paths resolve inside the sandbox as always.
 *
 * A tree is not atomic as a single file is: a failed upload leaves the members written so far.
 */
import { posix } from 'node:path'
import { extract, type Header } from 'tar-stream'
import type { SandboxFiles, SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { wellFormed } from '../../text.js'
import type { FilesLimits } from './file-requests.js'
import type { UploadSink } from './file-upload.js'
import { memberNames } from './tar-format.js'

/** A member's name as a path below the root, or refused: no absolute names, no `..`. */
export function memberPath (name: string): string[] {
  if (name.startsWith('/')) throw badMember(name, 'is absolute')
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw badMember(name, 'climbs out of the target with ..')
  return parts
}

function badMember (name: string, why: string): Error {
  const shown = wellFormed(name.slice(0, 200))
  return createError(ErrorCodes.INVALID_ARGUMENT, `tar member ${JSON.stringify(shown)} ${why}`, { field: 'data', member: shown })
}

type Member = AsyncIterable<Buffer> & { resume: () => unknown }

/** The longest path the kernel takes, its NUL included (PATH_MAX). */
const MAX_PATH_BYTES = 4096

export class TarSink implements UploadSink {
  private readonly parser = extract()
  /** Members made symlinks, by their path below the root. */
  private readonly links = new Set<string>()
  private members = 0
  private failure: Error | undefined
  private readonly unpacked: Promise<void>

  constructor (private readonly files: SandboxFiles, private readonly handle: SandboxHandle, private readonly root: string, private readonly limits: FilesLimits & { maxTarMembers: number }) {
    this.unpacked = this.unpack()
    this.unpacked.catch((err: unknown) => { this.failure ??= err instanceof Error ? err : new Error(String(err)) })
  }

  /** Makes the target directory (and the ones above it). */
  async open (): Promise<void> {
    await this.files.mkdir(this.handle, this.root, { parents: true })
  }

  take (_offset: number, _data: Uint8Array, ordered: Uint8Array[]): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    // Written at once, in arrival order; the chunk is answered when the parser has room again.
    let room = true
    for (const piece of ordered) room = this.parser.write(Buffer.from(piece.buffer, piece.byteOffset, piece.length))
    if (room) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const done = (): void => { this.parser.off('drain', done); this.parser.off('close', done); if (this.failure !== undefined) reject(this.failure); else resolve() }
      this.parser.on('drain', done)
      this.parser.on('close', done)
    })
  }

  async finish (): Promise<void> {
    if (this.failure !== undefined) throw this.failure
    this.parser.end(undefined as unknown as Buffer) // streamx's end takes an optional last chunk; its types want one
    await this.unpacked
    if (this.failure !== undefined) throw this.failure
  }

  async abort (): Promise<void> {
    this.failure ??= createError(ErrorCodes.INVALID_ARGUMENT, 'upload given up', { field: 'upload' })
    this.parser.destroy()
    await this.unpacked.catch(() => {})
  }

  private async unpack (): Promise<void> {
    try {
      for await (const entry of this.parser) {
        if (++this.members > this.limits.maxTarMembers) throw createError(ErrorCodes.INVALID_ARGUMENT, `a tar may hold at most ${this.limits.maxTarMembers} members`, { field: 'data' })
        const body = entry as unknown as Member
        await this.member(entry.header, body)
        for await (const _rest of body) { /* what a member's handler did not read */ }
      }
    } catch (err) {
      if (isWarrenError(err)) throw err
      throw createError(ErrorCodes.INVALID_ARGUMENT, `the upload is not a readable tar: ${(err as Error).message}`, { field: 'data' })
    }
  }

  private async member (h: Header, body: Member): Promise<void> {
    const { name, linkname } = memberNames(h)
    // Measured before any work per part: a name of 400 KB (a pax header may hold 4 MiB) made the
    // walk below quadratic and froze the node for minutes. No path the sandbox can hold is longer.
    for (const [field, text] of [['name', name], ['linkname', linkname]] as const) {
      if (Buffer.byteLength(text) + Buffer.byteLength(this.root) + 1 > MAX_PATH_BYTES) throw badMember(name, `has a ${field} longer than a path may be (${MAX_PATH_BYTES - 1} bytes with the target directory)`)
      if (text.includes('\0')) throw badMember(name, `has a ${field} holding NUL`)
    }
    const parts = memberPath(name)
    const rel = parts.join('/')
    // Each directory on the way, built as it goes (linear in the name's length).
    let prefix = ''
    for (const part of parts) {
      prefix = prefix === '' ? part : `${prefix}/${part}`
      if (this.links.has(prefix)) throw badMember(name, 'goes through (or replaces) a symlink the tar made')
    }
    const path = rel === '' ? this.root : posix.join(this.root, rel)
    const mode = h.mode !== undefined ? h.mode & 0o7777 : undefined
    switch (h.type ?? 'file') {
      case 'directory':
        await this.files.mkdir(this.handle, path, { parents: true, ...(mode !== undefined ? { mode } : {}) })
        return
      case 'file':
      case 'contiguous-file':
        if (rel === '') throw badMember(name, 'is a file where the target directory is')
        await this.file(path, mode, body)
        return
      case 'symlink':
        if (rel === '' || linkname === '') throw badMember(name, 'is a symlink without a target')
        await this.files.symlink(this.handle, path, linkname)
        this.links.add(rel)
        return
      default:
        throw badMember(name, `is a ${String(h.type)}: only files, directories and symlinks are unpacked`)
    }
  }

  /** Writes a member's body in pieces of at most a chunk, the first creating (or replacing) the file. */
  private async file (path: string, mode: number | undefined, body: Member): Promise<void> {
    const piece = this.limits.maxChunkBytes
    let held: Buffer[] = []
    let heldBytes = 0
    let offset = 0
    const flush = async (): Promise<void> => {
      const data = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes)
      await this.files.write(this.handle, path, data, offset === 0 ? (mode !== undefined ? { mode } : {}) : { offset })
      offset += data.length
      held = []
      heldBytes = 0
    }
    for await (const buf of body) {
      for (let at = 0; at < buf.length;) {
        const take = Math.min(piece - heldBytes, buf.length - at)
        held.push(buf.subarray(at, at + take))
        heldBytes += take
        at += take
        if (heldBytes === piece) await flush()
      }
    }
    if (heldBytes > 0 || offset === 0) await flush()
  }
}
