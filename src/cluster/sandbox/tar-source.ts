/**
 * A tree download: a directory of the sandbox (or one file) packed into a tar as the client
 * reads it, page by numbered page. The walk is a generator the pages pull from: it reads each
 * file a chunk at a time with the backend's file operations and stands still while nobody
 * reads, so the node holds at most a chunk and the last page (kept so a page asked again after a
 * reconnect is the same bytes). Symlinks go as symlinks, never followed; modes and mtimes are
 * kept; entries that are neither files, directories nor symlinks are left out.
 */
import { posix } from 'node:path'
import type { FileStat, SandboxFiles, SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import type { FilesLimits, TarPage } from './file-requests.js'
import { tooLarge } from './file-upload.js'
import { TAR_END, tarHeader, tarPadding } from './tar-format.js'

/** How deep a walk goes before it refuses the tree (a loop of bind mounts, or a silly tree). */
const MAX_DEPTH = 256

export class TarSource {
  private readonly blocks: AsyncGenerator<Buffer>
  private leftover: Buffer | undefined
  private last: TarPage | undefined
  private failure: unknown
  private busy: Promise<unknown> = Promise.resolve()
  private members = 0
  lastAt = Date.now()

  constructor (private readonly files: SandboxFiles, private readonly handle: SandboxHandle, private readonly root: string, private readonly limits: FilesLimits & { maxTarMembers: number }) {
    this.blocks = this.tar()
  }

  /**
   * Page `seq`: the next one, or the last one again.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `seq` for any other number; what the walk failed with
   */
  read (seq: number): Promise<TarPage> {
    this.lastAt = Date.now()
    const next = this.busy.then(() => this.page(seq))
    this.busy = next.catch(() => {})
    return next
  }

  /** Stops the walk (once the page being made, if any, is done). */
  close (): void {
    this.busy = this.busy.then(() => this.blocks.return(undefined)).catch(() => {})
  }

  private async page (seq: number): Promise<TarPage> {
    if (this.last !== undefined && seq === this.last.seq) return this.last
    if (this.failure !== undefined) throw this.failure
    const due = this.last === undefined ? 0 : this.last.seq + 1
    if (seq !== due || this.last?.done === true) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `page ${seq} of this download is not the next one (${this.last?.done === true ? 'it has ended' : due})`, { field: 'seq', next: due })
    }
    const want = this.limits.maxChunkBytes
    const held: Buffer[] = []
    let bytes = 0
    let done = false
    while (bytes < want) {
      let buf = this.leftover
      this.leftover = undefined
      if (buf === undefined) {
        let r: IteratorResult<Buffer>
        try {
          r = await this.blocks.next()
        } catch (err) {
          this.failure = err // a walk that failed ends the download: every later page says why
          throw err
        }
        if (r.done === true) { done = true; break }
        buf = r.value
      }
      if (bytes + buf.length > want) {
        this.leftover = buf.subarray(want - bytes)
        buf = buf.subarray(0, want - bytes)
      }
      held.push(buf)
      bytes += buf.length
    }
    this.last = { seq, data: held.length === 1 ? held[0]! : Buffer.concat(held, bytes), done }
    return this.last
  }

  /** The whole tar, block by block, as the walk meets each member. */
  private async * tar (): AsyncGenerator<Buffer> {
    const st = await this.files.stat(this.handle, this.root, { follow: true })
    if (st.type === 'dir') yield * this.dir(this.root, '', 0)
    else if (st.type === 'file') yield * this.file(this.root, posix.basename(this.root), st)
    else throw createError(ErrorCodes.INVALID_ARGUMENT, `${this.root} is neither a file nor a directory`, { field: 'path' })
    yield TAR_END
  }

  private count (): void {
    if (++this.members > this.limits.maxTarMembers) throw createError(ErrorCodes.INVALID_ARGUMENT, `the tree holds more than ${this.limits.maxTarMembers} entries`, { field: 'path' })
  }

  private async * dir (path: string, rel: string, depth: number): AsyncGenerator<Buffer> {
    if (depth > MAX_DEPTH) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} is more than ${MAX_DEPTH} directories deep`, { field: 'path' })
    const { entries, truncated } = await this.files.list(this.handle, path)
    if (truncated) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} holds more entries than one listing returns`, { field: 'path' })
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const e of entries) {
      const child = posix.join(path, e.name)
      const name = rel === '' ? e.name : `${rel}/${e.name}`
      if (e.type === 'dir') {
        this.count()
        yield tarHeader({ name, type: 'directory', mode: e.mode, mtimeMs: e.mtimeMs })
        yield * this.dir(child, name, depth + 1)
      } else if (e.type === 'file') {
        yield * this.file(child, name, await this.files.stat(this.handle, child))
      } else if (e.type === 'symlink') {
        const link = await this.files.stat(this.handle, child)
        this.count()
        yield tarHeader({ name, type: 'symlink', linkname: link.target ?? '', mode: link.mode, mtimeMs: link.mtimeMs })
      }
    }
  }

  private async * file (path: string, name: string, st: FileStat): AsyncGenerator<Buffer> {
    this.count()
    if (st.type !== 'file') return // replaced by something else since it was listed
    if (st.size > this.limits.maxFileBytes) throw tooLarge(st.size, this.limits.maxFileBytes)
    yield tarHeader({ name, type: 'file', size: st.size, mode: st.mode, mtimeMs: st.mtimeMs })
    for (let offset = 0; offset < st.size;) {
      const data = await this.files.read(this.handle, path, { offset, length: Math.min(this.limits.maxChunkBytes, st.size - offset) })
      if (data.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} shrank while it was packed`, { field: 'path' })
      offset += data.length
      yield Buffer.from(data.buffer, data.byteOffset, data.length)
    }
    yield tarPadding(st.size)
  }
}
