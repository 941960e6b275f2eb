/**
 * The sink of a file upload. The bytes go to a temporary name in the same directory, each chunk
 * written at its offset (so one sent twice lands on the same bytes), and only when the upload
 * ends whole and checked is the file renamed to its real name: rename(2) within one directory
 * is atomic, so a reader of the real name sees the old file or the new one, and a failed or
 * abandoned upload leaves no half file under it (its temporary file is removed).
 */
import { posix } from 'node:path'
import type { SandboxFiles, SandboxHandle } from '../../backends/types.js'
import { createError, isWarrenError } from '../../errors.js'
import { nameToBytes } from '../../file-names.js'
import type { UploadSink } from './file-upload.js'

/** A file name's most bytes (NAME_MAX). */
const NAME_MAX = 255

/**
 * The temporary name of an upload: hidden, beside its target, named after the upload (and after
 * the target while that fits a name: a target of 240 bytes made one past NAME_MAX, and its write
 * failed with "File name too long").
 */
export function uploadTempPath (path: string, uploadId: string): string {
  const tag = `.warren-upload-${uploadId}`
  const named = `.${posix.basename(path)}${tag}`
  return posix.join(posix.dirname(path), nameToBytes(named).length <= NAME_MAX ? named : tag)
}

export class FileSink implements UploadSink {
  private readonly temp: string

  constructor (private readonly files: SandboxFiles, private readonly handle: SandboxHandle, private readonly path: string, uploadId: string, private readonly mode: number | undefined) {
    this.temp = uploadTempPath(path, uploadId)
  }

  /** Creates the (empty) temporary file, and the directories above it. */
  async open (): Promise<void> {
    await this.files.write(this.handle, this.temp, new Uint8Array(0), this.mode !== undefined ? { mode: this.mode } : {}).catch((err: unknown) => { throw this.asTarget(err) })
  }

  async take (offset: number, data: Uint8Array): Promise<void> {
    if (data.length > 0) await this.files.write(this.handle, this.temp, data, { offset }).catch((err: unknown) => { throw this.asTarget(err) })
  }

  async finish (): Promise<void> {
    try {
      await this.files.rename(this.handle, this.temp, this.path)
    } catch (err) {
      await this.abort()
      throw this.asTarget(err)
    }
  }

  /** A refusal about the temporary file, told about the path the caller named (which it is for). */
  private asTarget (err: unknown): unknown {
    if (!isWarrenError(err) || !err.message.includes(this.temp)) return err
    return createError(err.code, err.message.split(this.temp).join(this.path), err.details)
  }

  async abort (): Promise<void> {
    await this.files.remove(this.handle, this.temp).catch(() => {})
  }
}
