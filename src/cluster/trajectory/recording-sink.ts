/**
 * An upload's sink that also records: the bytes in order go to the trajectory as they go to the
 * sandbox, and the step is written only once the real sink has made the result visible (a file
 * renamed into place, a tar unpacked). An upload given up records nothing.
 */
import type { UploadSink } from '../sandbox/file-upload.js'
import type { BytesRecorder } from './recorded-bytes.js'

export class RecordingSink implements UploadSink {
  /**
   * @param content where the bytes are recorded (the sandbox's recorder's `bytes()`)
   * @param commit writes the step once the upload is visible
   */
  constructor (private readonly inner: UploadSink, private readonly content: BytesRecorder, private readonly commit: (content: BytesRecorder) => void) {}

  take (offset: number, data: Uint8Array, ordered: Uint8Array[]): Promise<void> {
    for (const piece of ordered) this.content.write(piece)
    return this.inner.take(offset, data, ordered)
  }

  async finish (): Promise<void> {
    await this.inner.finish()
    this.commit(this.content)
  }

  async abort (): Promise<void> {
    this.content.discard()
    await this.inner.abort()
  }
}
