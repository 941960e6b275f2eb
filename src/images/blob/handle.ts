/** A layer handle: reads through the cache, holds the layer's reference until closed. */
import { createError, ErrorCodes } from '../../errors.js'
import type { CachedLayer } from './layer.js'
import type { LayerHandle } from './types.js'

export class Handle implements LayerHandle {
  readonly digest: string
  readonly size: number
  readonly chunkBytes: number
  private closed = false
  private readonly reads = new Set<Promise<unknown>>()

  constructor (private readonly layer: CachedLayer, private readonly release: () => Promise<void>) {
    this.digest = layer.digest
    this.size = layer.size
    this.chunkBytes = layer.chunkBytes
  }

  read (offset: number, length: number): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(createError(ErrorCodes.INVALID_ARGUMENT, `read on a closed handle of ${this.digest}`))
    const p = this.layer.read(offset, length, true)
    this.reads.add(p)
    const done = (): void => { this.reads.delete(p) }
    p.then(done, done)
    return p
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.allSettled([...this.reads])
    await this.release()
  }
}
