/**
 * `sandbox.files`: files of any size up to the cluster's maximum, in and out of a sandbox, as
 * bytes, text or streams, plus the directory operations. A file moves in chunks, a bounded
 * number in flight (the window is the flow control both ways); a write goes to a temporary name
 * and takes its real name only once the node has checked its size and sha256. Chunks are
 * placed by offset, so one re-sent after a reconnect lands on the same bytes.
 */
import { createHash } from 'node:crypto'
import { posix } from 'node:path'
import { nanoid } from 'nanoid'
import type { FileEntry, FileStat } from '../backends/types.js'
import type { UploadResult, UploadState } from '../cluster/index.js'
import { createError, ErrorCodes, isWarrenError } from '../errors.js'
import { nameFromWire, nameToWire, type WireName } from '../file-names.js'
import type { ExecTransport } from './exec.js'
import { retryPause, worthRetrying } from './request-errors.js'
import { chunksOf, knownSize, type WriteData } from './file-source.js'
import { downloadTree, uploadTree } from './files-tree.js'

export type { WriteData } from './file-source.js'

const KiB = 1024

/** How the SDK moves files; the cluster's bounds (`FilesDefaults`) are the node's to say. */
export const FilesClientDefaults = {
  /** Bytes per chunk sent or asked for (the node's `maxChunkBytes` caps it). */
  chunkBytes: 768 * KiB,
  /** Chunks in flight per transfer, each way. */
  inFlight: 8,
  /** Time one file request gets. */
  requestTimeoutMs: 60_000,
  /** Transient failures (a reconnect, a timeout, an overloaded node) one request retries. */
  maxRetries: 30
}

/** A directory entry, with its full path in the sandbox. */
export interface FileInfo extends FileEntry { path: string }

/** What a write made. */
export interface WriteInfo { path: string, size: number, sha256: string }

/** How `read` hands the file back. */
export type ReadFormat = 'bytes' | 'text' | 'stream'


export class SandboxFiles {
  constructor (private readonly t: ExecTransport, private readonly sandboxId: () => string) {}

  /**
   * Creates or replaces a file with `data` (bytes, text, a web ReadableStream, an async iterable
   * such as a Node Readable). Parents are made. Atomic: until it resolves the old file (or none)
   * is what the path holds, and a failed write leaves nothing behind.
   * @returns the size and sha256 the node checked
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `size` past the cluster's maximum, `path` for a directory
   */
  async write (path: string, data: WriteData, opts: { mode?: number } = {}): Promise<WriteInfo> {
    return await this.send(path, data, { format: 'file', ...(opts.mode !== undefined ? { mode: opts.mode } : {}) })
  }

  /** Reads a whole file: bytes by default, `format: 'text'` a UTF-8 string, `format: 'stream'` a web ReadableStream. */
  async read (path: string, opts?: { format?: 'bytes' }): Promise<Uint8Array>
  async read (path: string, opts: { format: 'text' }): Promise<string>
  async read (path: string, opts: { format: 'stream' }): Promise<ReadableStream<Uint8Array>>
  async read (path: string, opts: { format?: ReadFormat } = {}): Promise<Uint8Array | string | ReadableStream<Uint8Array>> {
    if (opts.format === 'stream') return this.readStream(path)
    const parts: Uint8Array[] = []
    let size = 0
    for await (const chunk of this.chunks(path)) { parts.push(chunk); size += chunk.byteLength }
    const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size)
    return opts.format === 'text' ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8') : bytes
  }

  /**
   * A file as a web ReadableStream of chunks (also an async iterable): read ahead at most
   * `FilesClientDefaults.inFlight` chunks, so a slow reader holds the transfer back.
   */
  readStream (path: string): ReadableStream<Uint8Array> {
    const it = this.chunks(path)
    return new ReadableStream<Uint8Array>({
      async pull (controller) {
        const r = await it.next()
        if (r.done === true) controller.close()
        else controller.enqueue(r.value)
      },
      async cancel () { await it.return(undefined) }
    }, { highWaterMark: 0 })
  }

  /** The entries of a directory (at most 10,000: a larger directory's listing is cut there). */
  async list (path: string): Promise<FileInfo[]> {
    const { entries } = await this.call<{ entries: Array<FileEntry & { name: WireName }>, truncated: boolean }>({ op: 'list', path }, true)
    return entries.map((e) => {
      const name = nameFromWire(e.name)
      return { ...e, name, path: posix.join(path, name) }
    })
  }

  /** Describes a path; a symlink itself unless `follow`. @throws WARREN_ERR_NOT_FOUND */
  async stat (path: string, opts: { follow?: boolean } = {}): Promise<FileStat> {
    const st = await this.call<FileStat & { target?: WireName }>({ op: 'stat', path, ...(opts.follow === true ? { follow: true } : {}) }, true)
    return st.target === undefined ? st : { ...st, target: nameFromWire(st.target) }
  }

  /** True when something is at `path` (a dangling symlink counts). */
  async exists (path: string): Promise<boolean> {
    try {
      await this.stat(path)
      return true
    } catch (err) {
      if (isWarrenError(err, ErrorCodes.NOT_FOUND)) return false
      throw err
    }
  }

  /** Makes a directory; `parents`: and the missing ones above, an existing one being success. */
  async mkdir (path: string, opts: { parents?: boolean, mode?: number } = {}): Promise<void> {
    await this.call({ op: 'mkdir', path, ...(opts.parents === true ? { parents: true } : {}), ...(opts.mode !== undefined ? { mode: opts.mode } : {}) }, false)
  }

  /** Removes a file, a symlink or an empty directory; `recursive`: a whole tree (links are removed, not followed). */
  async remove (path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.call({ op: 'remove', path, ...(opts.recursive === true ? { recursive: true } : {}) }, false)
  }

  /** Renames (atomically within one file system). */
  async rename (from: string, to: string): Promise<void> {
    await this.call({ op: 'rename', path: from, to }, false)
  }

  /**
   * Copies a local file or directory tree into the sandbox at `sandboxPath`: a tree goes as a tar
   * (modes kept, symlinks as symlinks), unpacked on the node as it arrives.
   */
  async upload (localPath: string, sandboxPath: string): Promise<WriteInfo> {
    return await uploadTree(this, localPath, sandboxPath)
  }

  /**
   * Copies a file or directory tree of the sandbox to `localPath` (modes kept, symlinks as
   * symlinks); nothing is written outside `localPath`, whatever the tree holds.
   */
  async download (sandboxPath: string, localPath: string): Promise<void> {
    await downloadTree(this, sandboxPath, localPath)
  }

  /** @internal An upload of either format; `files-tree` sends its tars through it. */
  async send (path: string, data: WriteData, opts: { format: 'file' | 'tar', mode?: number }): Promise<WriteInfo> {
    const upload = nanoid(16)
    const size = knownSize(data)
    const begin = await this.call<UploadState>({
      op: 'write-begin', upload, path, format: opts.format, ...(opts.mode !== undefined ? { mode: opts.mode } : {}), ...(size !== undefined ? { size } : {})
    }, true)
    const chunkBytes = Math.min(FilesClientDefaults.chunkBytes, begin.maxChunkBytes)
    const hash = createHash('sha256')
    const inflight = new Set<Promise<unknown>>()
    let failure: unknown
    let offset = 0
    try {
      for await (const chunk of chunksOf(data, chunkBytes)) {
        if (offset + chunk.byteLength > begin.maxFileBytes) {
          throw createError(ErrorCodes.INVALID_ARGUMENT, `size exceeds the maximum file size of ${begin.maxFileBytes} bytes`, { field: 'size', max: begin.maxFileBytes })
        }
        hash.update(chunk)
        const p = this.call({ op: 'write-chunk', upload, offset, data: chunk }, true)
        offset += chunk.byteLength
        inflight.add(p)
        p.then(() => inflight.delete(p), (err: unknown) => { failure ??= err; inflight.delete(p) })
        while (inflight.size >= FilesClientDefaults.inFlight && failure === undefined) await Promise.race(inflight).catch(() => {})
        if (failure !== undefined) throw failure
      }
      await Promise.all(inflight)
      const r = await this.call<UploadResult>({ op: 'write-end', upload, size: offset, sha256: hash.digest('hex') }, true)
      return { path, size: r.size, sha256: r.sha256 }
    } catch (err) {
      await Promise.allSettled(inflight)
      await this.call({ op: 'write-abort', upload }, false).catch(() => {})
      throw err
    }
  }

  /**
   * The chunks of a file in order, read ahead by offset a window at a time. The file's size is
   * taken first and checked at the end with its mtime: a file that changed while it was read is
   * refused rather than handed back torn. Files that say size 0 (those of /proc) are read until
   * they end.
   */
  async * chunks (path: string): AsyncGenerator<Uint8Array> {
    const first = await this.stat(path, { follow: true })
    if (first.type === 'dir') throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} is a directory`, { field: 'path' })
    if (first.type !== 'file') throw createError(ErrorCodes.INVALID_ARGUMENT, `${path} is not a regular file`, { field: 'path' })
    const length = FilesClientDefaults.chunkBytes
    const read = (offset: number): Promise<Uint8Array> => this.call<Uint8Array>({ op: 'read', path, offset, length }, true)
    if (first.size === 0) {
      for (let offset = 0; ;) {
        const data = await read(offset)
        if (data.byteLength === 0) return
        offset += data.byteLength
        yield data
      }
    }
    const ahead: Array<Promise<Uint8Array>> = []
    let next = 0
    const fill = (): void => {
      while (ahead.length < FilesClientDefaults.inFlight && next < first.size) {
        const p = read(next)
        p.catch(() => {}) // awaited in order below
        ahead.push(p)
        next += length
      }
    }
    try {
      fill()
      for (let offset = 0; offset < first.size;) {
        const data = await ahead.shift()!
        const want = Math.min(length, first.size - offset)
        if (data.byteLength !== want) throw changed(path)
        offset += data.byteLength
        fill()
        yield data
      }
    } finally {
      await Promise.allSettled(ahead)
    }
    const last = await this.stat(path, { follow: true })
    if (last.size !== first.size || last.mtimeMs !== first.mtimeMs) throw changed(path)
  }

  /**
   * One file request. `idempotent` ones are sent again after a reconnect or a transient failure
   * (chunks by offset, begins and ends by upload id); the others only when the node was too busy
   * to take them, which means they were not done.
   */
  async call<R = unknown> (req: Record<string, unknown>, idempotent: boolean): Promise<R> {
    const message = { type: 'files', id: this.sandboxId(), ...req, ...wirePaths(req) }
    for (let failures = 0; ; failures++) {
      try {
        const ask = this.t.request<R>(message, FilesClientDefaults.requestTimeoutMs)
        if (!idempotent) return await ask
        // A reconnect means the request may have died with the old socket: send it again.
        const answer = await Promise.race([ask.then((value) => ({ value })), this.t.reconnected().then(() => undefined)])
        if (answer !== undefined) return answer.value
        ask.catch(() => {})
      } catch (err) {
        const again = idempotent ? worthRetrying(err, this.t, true) : !this.t.closed() && isWarrenError(err, ErrorCodes.OVERLOADED)
        if (!again || failures >= FilesClientDefaults.maxRetries) throw err
        await retryPause(err, failures + 1)
      }
    }
  }
}

/** A request's paths as they travel: a str, or the bytes of a name that is not UTF-8 (see file-names.ts). */
function wirePaths (req: Record<string, unknown>): Record<string, WireName> {
  const out: Record<string, WireName> = {}
  for (const key of ['path', 'to'] as const) if (typeof req[key] === 'string') out[key] = nameToWire(req[key], key)
  return out
}

function changed (path: string): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, `${path} changed while it was read`, { field: 'path', reason: 'changed' })
}
