/**
 * A sandbox's file service on its node: answers the file requests of `file-requests.ts` with
 * the backend's file operations, and keeps the sandbox's open uploads and tree downloads, each
 * bounded in number and dropped when idle. Nothing here holds a whole file.
 */
import { posix } from 'node:path'
import type { Backend, SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { nameToWire } from '../../file-names.js'
import { AheadBudget } from './file-budget.js'
import { FileSink } from './file-sink.js'
import type { UploadSink } from './file-upload.js'
import { FilesDefaults, localFileRequest, type FileRequest, type FilesLimits, type LocalFileRequest, type UploadResult, type UploadState } from './file-requests.js'
import { tooLarge, Upload } from './file-upload.js'
import { TarSink } from './tar-sink.js'
import { TarSource } from './tar-source.js'
import { RecordingSink, type SandboxRecorder } from '../trajectory/index.js'

/** What the file service tells the sandbox's trajectory: the changes it made. */
/** The requests that change the sandbox's files: each is a step of its trajectory. */
const CHANGES: ReadonlySet<FileRequest['op']> = new Set(['mkdir', 'remove', 'rename', 'symlink', 'write-begin'])

export type FileStepRecorder = Pick<SandboxRecorder, 'admitStep' | 'bytes' | 'write' | 'upload' | 'remove' | 'rename' | 'mkdir' | 'symlink'>

/** Members one tree upload or download may hold. */
export const TarDefaults = { maxTarMembers: 100_000 }

const TRANSFER_ID = /^[A-Za-z0-9_-]+$/

function transferId (id: string, field: string, limits: FilesLimits): string {
  if (id.length > limits.maxTransferIdLength || !TRANSFER_ID.test(id)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} must be 1 to ${limits.maxTransferIdLength} characters of [A-Za-z0-9_-]`, { field })
  }
  return id
}

export class SandboxFileService {
  private readonly uploads = new Map<string, Upload>()
  /** Ended uploads' answers, oldest first, so an end (or a chunk) retried after a reconnect is answered again. */
  private readonly ended = new Map<string, { path: string, result: UploadResult }>()
  private readonly downloads = new Map<string, TarSource>()
  private readonly limits: FilesLimits & typeof TarDefaults

  private readonly budget: AheadBudget

  /**
   * @param budget the node's memory for upload chunks held ahead of gaps, shared by its sandboxes (without it, one of this sandbox's own)
   * @param recorder the sandbox's trajectory, told each change once it is made
   */
  constructor (private readonly backend: Backend, limits: Partial<FilesLimits> = {}, budget?: AheadBudget, private readonly recorder?: FileStepRecorder) {
    this.limits = { ...FilesDefaults, ...TarDefaults, ...limits }
    this.budget = budget ?? new AheadBudget(this.limits.nodeAheadBytes)
  }

  /**
   * Does what the request asks in the sandbox behind `handle`.
   * @param recorded false for a change the control plane re-applies from the trajectory itself
   *   (a restore): it is done, but not recorded a second time
   */
  async handle (handle: SandboxHandle, req: FileRequest, recorded = true): Promise<unknown> {
    const r = localFileRequest(req)
    const files = this.backend.files
    const recorder = recorded ? this.recorder : undefined
    // A change that could not be recorded is not made (the trajectory is full).
    if (CHANGES.has(r.op)) recorder?.admitStep()
    switch (r.op) {
      // Names go back in their wire form: a str, or the bytes of one that is not UTF-8.
      case 'stat': {
        const st = await files.stat(handle, r.path, r.follow === true ? { follow: true } : {})
        return st.target === undefined ? st : { ...st, target: nameToWire(st.target) }
      }
      case 'list': {
        const { entries, truncated } = await files.list(handle, r.path)
        const out = []
        let bytes = 0
        for (const e of entries) {
          const name = nameToWire(e.name)
          bytes += (typeof name === 'string' ? Buffer.byteLength(name) : name.length) + 64
          if (bytes > this.limits.maxListBytes) return { entries: out, truncated: true }
          out.push({ ...e, name })
        }
        return { entries: out, truncated }
      }
      case 'read': {
        if (r.length > this.limits.maxChunkBytes) {
          throw createError(ErrorCodes.INVALID_ARGUMENT, `a read returns at most ${this.limits.maxChunkBytes} bytes`, { field: 'length', max: this.limits.maxChunkBytes })
        }
        if (r.offset >= this.limits.maxFileBytes) throw tooLarge(r.offset + 1, this.limits.maxFileBytes)
        if (r.offset === 0) {
          // A file past the maximum is refused as a whole at its first chunk, not cut at the maximum.
          const st = await files.stat(handle, r.path, { follow: true })
          if (st.size > this.limits.maxFileBytes) throw tooLarge(st.size, this.limits.maxFileBytes)
        }
        return await files.read(handle, r.path, { offset: r.offset, length: Math.min(r.length, this.limits.maxFileBytes - r.offset) })
      }
      case 'mkdir':
        await files.mkdir(handle, r.path, { ...(r.mode !== undefined ? { mode: r.mode } : {}), ...(r.parents === true ? { parents: true } : {}) })
        recorder?.mkdir(r.path, r.mode, r.parents === true)
        return true
      case 'remove':
        await files.remove(handle, r.path, r.recursive === true ? { recursive: true } : {})
        recorder?.remove(r.path, r.recursive === true)
        return true
      case 'rename':
        await files.rename(handle, r.path, r.to)
        recorder?.rename(r.path, r.to)
        return true
      case 'symlink':
        await files.symlink(handle, r.path, r.target)
        recorder?.symlink(r.path, r.target)
        return true
      case 'write-begin': return await this.begin(handle, r, recorder)
      case 'write-chunk': {
        const up = this.uploads.get(r.upload)
        if (up === undefined) return { received: this.endedOrMissing(r.upload).result.size }
        return await up.chunk(r.offset, r.data)
      }
      case 'write-end': {
        const up = this.uploads.get(r.upload)
        if (up === undefined) return this.endedOrMissing(r.upload).result
        try {
          const result = await up.end(r.size, r.sha256)
          this.remember(up, result)
          return result
        } catch (err) {
          // A mismatch or a failed write is final: the upload is gone, and so is what it left.
          this.uploads.delete(up.id)
          await up.abort()
          throw err
        }
      }
      case 'write-abort': {
        const up = this.uploads.get(r.upload)
        this.uploads.delete(r.upload)
        await up?.abort()
        return true
      }
      case 'tar-begin': {
        const id = transferId(r.download, 'download', this.limits)
        if (this.downloads.has(id)) return true
        this.sweep()
        if (this.downloads.size >= this.limits.maxOpenDownloads) {
          throw createError(ErrorCodes.OVERLOADED, `sandbox has ${this.downloads.size} downloads open; end one first`, { retryAfterMs: 1000 })
        }
        // Checked before the walk starts, so a missing path is this request's error.
        const st = await files.stat(handle, r.path, { follow: true })
        if (st.type !== 'dir' && st.type !== 'file') throw createError(ErrorCodes.INVALID_ARGUMENT, `${r.path} is neither a file nor a directory`, { field: 'path' })
        this.downloads.set(id, new TarSource(files, handle, r.path, this.limits))
        return true
      }
      case 'tar-read': {
        const d = this.downloads.get(r.download)
        if (d === undefined) throw createError(ErrorCodes.NOT_FOUND, `no download ${r.download} in this sandbox`, { field: 'download' })
        return await d.read(r.seq)
      }
      case 'tar-end': {
        this.downloads.get(r.download)?.close()
        this.downloads.delete(r.download)
        return true
      }
    }
  }

  /** Drops uploads and downloads idle past `uploadIdleMs` (an upload's temporary file goes too). */
  sweep (now = Date.now()): void {
    for (const [id, up] of this.uploads) {
      if (now - up.lastAt > this.limits.uploadIdleMs) { this.uploads.delete(id); void up.abort() }
    }
    for (const [id, d] of this.downloads) {
      if (now - d.lastAt > this.limits.uploadIdleMs) { this.downloads.delete(id); d.close() }
    }
  }

  /** Ends everything open (the sandbox is going). */
  close (): void {
    for (const up of this.uploads.values()) void up.abort()
    for (const d of this.downloads.values()) d.close()
    this.uploads.clear()
    this.downloads.clear()
  }

  private async begin (handle: SandboxHandle, r: Extract<LocalFileRequest, { op: 'write-begin' }>, recorder: FileStepRecorder | undefined): Promise<UploadState> {
    const id = transferId(r.upload, 'upload', this.limits)
    const state = (received: number): UploadState => ({ received, maxChunkBytes: this.limits.maxChunkBytes, maxFileBytes: this.limits.maxFileBytes })
    const open = this.uploads.get(id)
    const done = this.ended.get(id)
    if (open !== undefined || done !== undefined) {
      // A begin retried after a reconnect: the same upload, from where it got to.
      if ((open?.path ?? done?.path) !== r.path) throw createError(ErrorCodes.INVALID_ARGUMENT, `upload ${id} is of another path`, { field: 'upload' })
      return state(open?.offset ?? done!.result.size)
    }
    if (r.size !== undefined && r.size > this.limits.maxFileBytes) throw tooLarge(r.size, this.limits.maxFileBytes)
    this.sweep()
    if (this.uploads.size >= this.limits.maxOpenUploads) {
      throw createError(ErrorCodes.OVERLOADED, `sandbox has ${this.uploads.size} uploads open; end one first`, { retryAfterMs: 1000 })
    }
    const files = this.backend.files
    if (r.format === 'tar') {
      const sink = new TarSink(files, handle, r.path, this.limits)
      await sink.open()
      this.uploads.set(id, new Upload(id, r.path, this.recorded(recorder, sink, (rec, content) => rec.upload(r.path, content)), this.limits, this.budget))
      return state(0)
    }
    const existing = await files.stat(handle, r.path, { follow: true }).catch((err: unknown) => {
      if (isWarrenError(err, ErrorCodes.NOT_FOUND)) return undefined
      throw err
    })
    if (existing?.type === 'dir') throw createError(ErrorCodes.INVALID_ARGUMENT, `${r.path} is a directory`, { field: 'path' })
    if (posix.basename(r.path) === '' || r.path.endsWith('/')) throw createError(ErrorCodes.INVALID_ARGUMENT, `${r.path} names a directory`, { field: 'path' })
    const sink = new FileSink(files, handle, r.path, id, r.mode)
    await sink.open()
    this.uploads.set(id, new Upload(id, r.path, this.recorded(recorder, sink, (rec, content) => rec.write(r.path, r.mode, content)), this.limits, this.budget))
    return state(0)
  }

  /** The sink, recording its bytes and, once it is visible, its step (when it is recorded at all). */
  private recorded (rec: FileStepRecorder | undefined, sink: UploadSink, commit: (rec: FileStepRecorder, content: ReturnType<FileStepRecorder['bytes']>) => void): UploadSink {
    return rec === undefined ? sink : new RecordingSink(sink, rec.bytes(), (content) => commit(rec, content))
  }

  private endedOrMissing (id: string): { path: string, result: UploadResult } {
    const done = this.ended.get(id)
    if (done === undefined) throw createError(ErrorCodes.NOT_FOUND, `no upload ${id} in this sandbox (ended, given up or idle too long)`, { field: 'upload' })
    return done
  }

  private remember (up: Upload, result: UploadResult): void {
    this.uploads.delete(up.id)
    this.ended.set(up.id, { path: up.path, result })
    while (this.ended.size > this.limits.rememberedUploads) this.ended.delete(this.ended.keys().next().value!)
  }
}
