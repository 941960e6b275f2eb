/**
 * A tree download: a directory of the sandbox (or one file) packed into a tar as the client
 * reads it, page by numbered page. The walk reads each file a chunk at a time with the
 * backend's file operations and waits while nobody reads, so the node holds at most a chunk, the
 * packer's small buffer and the last page (kept so a page asked again after a reconnect is the
 * same bytes). Symlinks go as symlinks, never followed; modes and mtimes are kept; entries that
 * are neither files, directories nor symlinks are left out.
 */
import { posix } from 'node:path'
import { pack, type Pack } from 'tar-stream'
import type { FileStat, SandboxFiles, SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import type { FilesLimits, TarPage } from './file-requests.js'
import { tooLarge } from './file-upload.js'

/** How deep a walk goes before it refuses the tree (a loop of bind mounts, or a silly tree). */
const MAX_DEPTH = 256

export class TarSource {
  private readonly packer: Pack = pack()
  private readonly pages: AsyncIterator<Buffer>
  private leftover: Buffer | undefined
  private last: TarPage | undefined
  private busy: Promise<unknown> = Promise.resolve()
  private members = 0
  private closed = false
  lastAt = Date.now()

  constructor (private readonly files: SandboxFiles, private readonly handle: SandboxHandle, private readonly root: string, private readonly limits: FilesLimits & { maxTarMembers: number }) {
    this.pages = this.packer[Symbol.asyncIterator]() as AsyncIterator<Buffer>
    // The walk's failure is the next page's rejection; with no page asked for yet, it is only an event.
    this.packer.on('error', () => {})
    this.walk().then(() => this.packer.finalize(), (err: unknown) => this.packer.destroy(err instanceof Error ? err : new Error(String(err))))
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

  /** Stops the walk. */
  close (): void {
    this.closed = true
    this.packer.destroy()
  }

  private async page (seq: number): Promise<TarPage> {
    if (this.last !== undefined && seq === this.last.seq) return this.last
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
        const r = await this.pages.next()
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

  private async walk (): Promise<void> {
    const st = await this.files.stat(this.handle, this.root, { follow: true })
    if (st.type === 'dir') await this.dir(this.root, '', 0)
    else if (st.type === 'file') await this.file(this.root, posix.basename(this.root), st)
    else throw createError(ErrorCodes.INVALID_ARGUMENT, `${this.root} is neither a file nor a directory`, { field: 'path' })
  }

  private count (): void {
    if (++this.members > this.limits.maxTarMembers) throw createError(ErrorCodes.INVALID_ARGUMENT, `the tree holds more than ${this.limits.maxTarMembers} entries`, { field: 'path' })
  }

  private async dir (path: string, rel: string, depth: number): Promise<void> {
    if (depth > MAX_DEPTH) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} is more than ${MAX_DEPTH} directories deep`, { field: 'path' })
    const { entries, truncated } = await this.files.list(this.handle, path)
    if (truncated) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} holds more entries than one listing returns`, { field: 'path' })
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const e of entries) {
      const child = posix.join(path, e.name)
      const name = rel === '' ? e.name : `${rel}/${e.name}`
      if (e.type === 'dir') {
        this.count()
        await this.add({ name, type: 'directory', mode: e.mode, mtime: new Date(e.mtimeMs) })
        await this.dir(child, name, depth + 1)
      } else if (e.type === 'file') {
        await this.file(child, name, await this.files.stat(this.handle, child))
      } else if (e.type === 'symlink') {
        const link = await this.files.stat(this.handle, child)
        this.count()
        await this.add({ name, type: 'symlink', linkname: link.target ?? '', mode: link.mode, mtime: new Date(link.mtimeMs) })
      }
    }
  }

  /** Adds an entry without a body. */
  private add (header: Parameters<Pack['entry']>[0]): Promise<void> {
    return new Promise((resolve, reject) => { this.packer.entry(header, (err) => { if (err !== undefined && err !== null) reject(err); else resolve() }) })
  }

  private async file (path: string, name: string, st: FileStat): Promise<void> {
    this.count()
    if (st.type !== 'file') return // replaced by something else since it was listed
    if (st.size > this.limits.maxFileBytes) throw tooLarge(st.size, this.limits.maxFileBytes)
    let settle!: (err?: Error | null) => void
    const ended = new Promise<void>((resolve, reject) => { settle = (err) => { if (err !== undefined && err !== null) reject(err); else resolve() } })
    const entry = this.packer.entry({ name, type: 'file', size: st.size, mode: st.mode, mtime: new Date(st.mtimeMs) }, settle)
    // A download closed mid-file, or a walk that failed in it (the file shrank, a read was
    // refused), destroys the entry: it rejects `ended` while the loop below awaits a read and
    // emits 'error'. Both are handled here (the walk's own error reaches the reader through the
    // packer); unhandled, either would end the node process.
    ended.catch(() => {})
    entry.on('error', () => {})
    for (let offset = 0; offset < st.size;) {
      if (this.closed || entry.destroyed) throw createError(ErrorCodes.INVALID_ARGUMENT, 'the download was closed', { field: 'download' })
      const data = await this.files.read(this.handle, path, { offset, length: Math.min(this.limits.maxChunkBytes, st.size - offset) })
      if (data.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} shrank while it was packed`, { field: 'path' })
      offset += data.length
      if (!entry.write(Buffer.from(data.buffer, data.byteOffset, data.length))) {
        // An entry destroyed already has emitted its close: waiting for one would wait for ever.
        if (!entry.destroyed) await new Promise<void>((resolve) => { entry.once('drain', resolve); entry.once('close', resolve) })
        if (entry.destroyed) throw createError(ErrorCodes.INVALID_ARGUMENT, 'the download was closed', { field: 'download' })
      }
    }
    entry.end(undefined as unknown as Buffer) // streamx's end takes an optional last chunk; its types want one
    await ended
  }
}
