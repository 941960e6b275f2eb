/**
 * `files.upload` and `files.download`: a local file or directory tree to or from a sandbox. A
 * single file goes as a file write or read; a tree goes as a tar stream (packed and unpacked as
 * it flows, never held whole), modes kept, symlinks kept as symlinks and never followed.
 *
 * Unpacking here cannot be led outside `localPath`: member names with `..` or a leading `/` are
 * refused, every directory on the way to a member must be a real directory (not a symlink,
 * whether the tar made it or it was there), and files are opened with O_NOFOLLOW.
 */
import { constants, createReadStream } from 'node:fs'
import { chmod, lstat, mkdir, open, readdir, readlink, stat, symlink, unlink } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { nanoid } from 'nanoid'
import { extract, type Header } from 'tar-stream'
import { memberNames, memberPath, TAR_END, tarHeader, tarPadding, type TarPage } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { isUtf8Name, nameFromBytes, nameToBytes } from '../file-names.js'
import { wellFormed } from '../text.js'
import type { SandboxFiles, WriteInfo } from './files.js'

/** How deep a local tree may go. */
const MAX_DEPTH = 256

/** Copies a local file or tree to `sandboxPath` (see `SandboxFiles.upload`). */
export async function uploadTree (files: SandboxFiles, localPath: string, sandboxPath: string): Promise<WriteInfo> {
  const st = await stat(localPath)
  if (st.isFile()) return await files.write(sandboxPath, createReadStream(localPath), { mode: st.mode & 0o7777 })
  if (!st.isDirectory()) throw createError(ErrorCodes.INVALID_ARGUMENT, `${localPath} is neither a file nor a directory`, { field: 'localPath' })
  // Packed as the upload pulls it: a local read that fails ends the upload with why.
  return await files.send(sandboxPath, packLocal(resolve(localPath)), { format: 'tar' })
}

/**
 * A local path for the file system calls: itself, or the bytes of one holding a name that is
 * not UTF-8 (escaped in the string, see file-names.ts), which Node's fs takes as a Buffer.
 */
function local (path: string): string | Buffer {
  return isUtf8Name(path) ? path : nameToBytes(path, 'localPath')
}

/** The tar of the tree under `root`, block by block: symlinks as symlinks, other kinds left out. */
async function * packLocal (root: string): AsyncGenerator<Buffer> {
  yield * packDir(root, '', 0)
  yield TAR_END
}

async function * packDir (dir: string, rel: string, depth: number): AsyncGenerator<Buffer> {
  if (depth > MAX_DEPTH) throw createError(ErrorCodes.INVALID_ARGUMENT, `${wellFormed(dir)} is more than ${MAX_DEPTH} directories deep`, { field: 'localPath' })
  // Names as bytes: a name that is not UTF-8 goes as exactly its bytes.
  const names = (await readdir(local(dir), { encoding: 'buffer' })).map(nameFromBytes)
  for (const name of names.sort()) {
    const path = join(dir, name)
    const member = rel === '' ? name : `${rel}/${name}`
    const st = await lstat(local(path))
    const common = { name: member, mode: st.mode & 0o7777, mtimeMs: st.mtimeMs }
    if (st.isDirectory()) {
      yield tarHeader({ ...common, type: 'directory' })
      yield * packDir(path, member, depth + 1)
    } else if (st.isSymbolicLink()) {
      yield tarHeader({ ...common, type: 'symlink', linkname: nameFromBytes(await readlink(local(path), { encoding: 'buffer' })) })
    } else if (st.isFile()) {
      yield tarHeader({ ...common, type: 'file', size: st.size })
      let sent = 0
      // At most the size the header gave (`end` is inclusive); a file that shrank is refused below.
      const body = st.size === 0 ? [] : createReadStream(local(path), { end: st.size - 1 }) as AsyncIterable<Buffer>
      for await (const chunk of body) {
        sent += chunk.length
        yield chunk
      }
      if (sent !== st.size) throw createError(ErrorCodes.INVALID_ARGUMENT, `${wellFormed(path)} changed size while it was packed`, { field: 'localPath' })
      yield tarPadding(st.size)
    }
  }
}

/** Copies a sandbox file or tree to `localPath` (see `SandboxFiles.download`). */
export async function downloadTree (files: SandboxFiles, sandboxPath: string, localPath: string): Promise<void> {
  const st = await files.stat(sandboxPath, { follow: true })
  if (st.type === 'file') {
    await writeLocalFile(localPath, st.mode, files.readStream(sandboxPath) as unknown as AsyncIterable<Uint8Array>)
    return
  }
  if (st.type !== 'dir') throw createError(ErrorCodes.INVALID_ARGUMENT, `${sandboxPath} is neither a file nor a directory`, { field: 'path' })
  const download = nanoid(16)
  await files.call({ op: 'tar-begin', download, path: sandboxPath }, true)
  const root = resolve(localPath)
  await mkdir(root, { recursive: true })
  const parser = extract()
  const dirModes: Array<{ path: string, mode: number }> = []
  const unpacked = (async () => {
    for await (const entry of parser) {
      await unpackMember(root, entry.header, entry as unknown as AsyncIterable<Buffer>, dirModes)
      for await (const _rest of entry) { /* the part a member's handler did not read */ }
    }
  })()
  unpacked.catch(() => {})
  try {
    for (let seq = 0; ; seq++) {
      const page = await files.call<TarPage>({ op: 'tar-read', download, seq }, true)
      if (page.data.byteLength > 0 && !parser.write(Buffer.from(page.data.buffer, page.data.byteOffset, page.data.byteLength))) {
        await Promise.race([new Promise<void>((resolve) => parser.once('drain', () => resolve())), unpacked])
      }
      if (page.done) break
    }
    parser.end(undefined as unknown as Buffer) // streamx's end takes an optional last chunk; its types want one
    await unpacked
  } finally {
    parser.destroy()
    await files.call({ op: 'tar-end', download }, true).catch(() => {})
  }
  // Modes of directories last, deepest first: a read-only directory does not block its own members.
  for (const d of dirModes.reverse()) await chmod(local(d.path), d.mode)
}

function outside (member: string, why: string): Error {
  const shown = wellFormed(member.slice(0, 200))
  return createError(ErrorCodes.INVALID_ARGUMENT, `tar member ${JSON.stringify(shown)} ${why}`, { field: 'localPath', member: shown })
}

/** Makes (or walks) the directories from `root` down to `parts`, refusing any that is not a real directory. */
async function realDirs (root: string, parts: string[], member: string): Promise<string> {
  let at = root
  for (const part of parts) {
    at = join(at, part)
    const st = await lstat(local(at)).catch(() => undefined)
    if (st === undefined) await mkdir(local(at), { mode: 0o755 })
    else if (!st.isDirectory()) throw outside(member, `goes through ${wellFormed(at)}, which is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'}`)
  }
  return at
}

async function unpackMember (root: string, h: Header, body: AsyncIterable<Buffer>, dirModes: Array<{ path: string, mode: number }>): Promise<void> {
  const { name, linkname } = memberNames(h)
  const parts = memberPath(name)
  if (parts.length === 0) return // the root itself
  const parent = await realDirs(root, parts.slice(0, -1), name)
  const target = join(parent, parts[parts.length - 1]!)
  const mode = h.mode & 0o7777
  const existing = await lstat(local(target)).catch(() => undefined)
  switch (h.type) {
    case 'directory':
      await realDirs(root, parts, name)
      dirModes.push({ path: target, mode })
      return
    case 'file':
    case 'contiguous-file':
      await writeLocalFile(target, mode, body)
      return
    case 'symlink':
      if (existing?.isDirectory() === true) throw outside(name, 'would replace a directory with a symlink')
      if (existing !== undefined) await unlink(local(target))
      await symlink(local(linkname), local(target))
      return
    default:
      // Devices, FIFOs and hard links are not made here.
  }
}

/** Writes a local file without following a symlink at its name, then gives it its mode. */
async function writeLocalFile (path: string, mode: number, body: AsyncIterable<Uint8Array>): Promise<void> {
  const fh = await open(local(path), constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600)
  try {
    for await (const chunk of body) {
      for (let at = 0; at < chunk.byteLength;) at += (await fh.write(chunk, at)).bytesWritten
    }
    await fh.chmod(mode & 0o7777)
  } finally {
    await fh.close()
  }
}
