/**
 * One layer in a node's cache: its present-chunk map, its open files while in use, and the read
 * path — serve present chunks from disk, fetch missing ones (one fetch per chunk however many
 * readers want it), check each against the manifest, store it, mark it durable.
 *
 * The cache (cache.ts) owns the lifecycle: reference counts, eviction, recording, prefetch.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import type { AccessRecorder } from './access-log.js'
import { asBlobError, blobError } from './errors.js'
import { fetchChunk, withDeadline, type BlobSource } from './fetch.js'
import { openLayerFiles, type LayerFiles } from './layer-files.js'
import type { Limiter, Priority, Ticket } from './limiter.js'
import { chunkSpan, packChunkHashes, parseManifest, type ChunkManifest } from './manifest.js'
import type { CacheCounters } from './metrics.js'

/** What a layer needs from its cache. */
export interface LayerContext {
  source: BlobSource
  limiter: Limiter
  fetchTimeoutMs: number
  /** Aborted when the cache closes: fetches stop, reads fail. */
  signal: AbortSignal
  counters: CacheCounters
  fetchFailed (digest: string, chunk: number | undefined, error: WarrenError): void
  corruptChunk (digest: string, chunk: number, attempt: number): void
  persistFailed (digest: string, chunk: number, error: Error): void
  /** Chunk bytes on disk changed by `delta` (the cache may evict). */
  grew (delta: number): void
}

interface OpenLayer {
  files: LayerFiles
  /** 32 bytes per chunk: the manifest's chunk hashes. */
  hashes: Buffer
}

interface Inflight {
  promise: Promise<Uint8Array>
  /** Raises a queued prefetch to demand priority. */
  promote (): void
}

export class CachedLayer {
  readonly digest: string
  readonly size: number
  readonly chunkBytes: number
  readonly count: number
  /** Handles and prefetches using the layer; never evicted above 0. */
  refs = 0
  lastUsed: number
  /** False until the first open by a user since the layer came into the cache: that open is a cold start. */
  everOpened = false
  /** Set while the layer is being evicted; openers wait for it, then start afresh. */
  evicting: Promise<void> | undefined
  recorder: AccessRecorder | undefined
  recordTimer: NodeJS.Timeout | undefined
  presentBytes = 0
  private openState: Promise<OpenLayer> | undefined
  private readonly inflight = new Map<number, Inflight>()
  private readonly background = new Set<Promise<unknown>>()

  /**
   * @param present 1 per chunk on disk (owned by the layer from now on)
   */
  constructor (readonly hex: string, readonly dir: string, manifest: Pick<ChunkManifest, 'digest' | 'size' | 'chunkBytes' | 'chunks'>,
    private readonly present: Uint8Array, lastUsed: number, private readonly ctx: LayerContext) {
    this.digest = manifest.digest
    this.size = manifest.size
    this.chunkBytes = manifest.chunkBytes
    this.count = manifest.chunks.length
    this.lastUsed = lastUsed
    for (let i = 0; i < this.count; i++) if (present[i] === 1) this.presentBytes += this.chunkLength(i)
  }

  /** True while chunk fetches or durability work are under way. */
  get busy (): boolean {
    return this.inflight.size > 0 || this.background.size > 0
  }

  /** Whether chunk `index` is on disk. */
  has (index: number): boolean {
    return this.present[index] === 1
  }

  /** Opens the files and loads the chunk hashes, once per use period. */
  opened (): Promise<OpenLayer> {
    if (this.openState === undefined) {
      const state = (async (): Promise<OpenLayer> => {
        const manifest = parseManifest(await readFile(join(this.dir, 'manifest.json'), 'utf8'), this.digest)
        return { files: await openLayerFiles(this.dir), hashes: packChunkHashes(manifest) }
      })()
      this.openState = state
      state.catch(() => { if (this.openState === state) this.openState = undefined })
    }
    return this.openState
  }

  /** Closes the files (the cache calls this when nobody uses the layer). */
  async closeFiles (): Promise<void> {
    const state = this.openState
    this.openState = undefined
    const open = await state?.catch(() => undefined)
    await open?.files.close()
  }

  /** Resolves once no fetch or durability work is left. */
  async settle (): Promise<void> {
    while (this.busy) await Promise.allSettled([...this.background, ...[...this.inflight.values()].map((f) => f.promise)])
  }

  /**
   * Reads `length` bytes at `offset` (fewer at the end of the layer, none past it).
   * @param record note the chunks for the cold-start record (prefetches do not)
   * @throws a blob error (details.errno 'EIO') when a missing chunk cannot be fetched or verified
   */
  async read (offset: number, length: number, record: boolean): Promise<Uint8Array> {
    if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `bad read: offset ${offset}, length ${length}`, { field: 'offset' })
    }
    if (this.ctx.signal.aborted) throw blobError('closed', 'the layer cache was closed', { digest: this.digest })
    const end = Math.min(this.size, offset + length)
    if (offset >= end) return new Uint8Array(0)
    try {
      return await this.readRange(offset, end, record)
    } catch (err) {
      throw asBlobError(err, { digest: this.digest, offset, length })
    }
  }

  private async readRange (offset: number, end: number, record: boolean): Promise<Uint8Array> {
    const open = await this.opened()
    const out = Buffer.allocUnsafe(end - offset)
    const first = Math.floor(offset / this.chunkBytes)
    const last = Math.floor((end - 1) / this.chunkBytes)
    let hit = 0
    const parts: Array<Promise<void>> = []
    for (let i = first; i <= last; i++) {
      if (record) this.recorder?.note(i)
      const cs = i * this.chunkBytes
      const from = Math.max(offset, cs)
      const to = Math.min(end, cs + this.chunkBytes)
      if (this.present[i] === 1) {
        parts.push(open.files.readAt(from, out, from - offset, to - from).then(() => { hit += to - from }))
      } else {
        parts.push(this.ensureChunk(open, i, 'high').then((data) => { out.set(data.subarray(from - cs, to - cs), from - offset) }))
      }
    }
    await Promise.all(parts)
    this.ctx.counters.bytesServed += out.length
    this.ctx.counters.bytesHit += hit
    return out
  }

  /**
   * Fetches the chunks of `indices` that are missing, `concurrency` at a time, at low priority.
   * Failures are counted, not thrown: a prefetch is only ever a head start.
   */
  async prefetch (indices: number[], concurrency: number): Promise<{ fetched: number, failed: number }> {
    const open = await this.opened()
    const todo = indices.filter((i) => i < this.count && this.present[i] !== 1)
    let fetched = 0
    let failed = 0
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < todo.length && !this.ctx.signal.aborted) {
        const i = todo[next++]!
        if (this.present[i] === 1) continue
        try {
          await this.ensureChunk(open, i, 'low')
          fetched++
        } catch {
          failed++
        }
      }
    }
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, todo.length)) }, worker))
    this.ctx.counters.prefetchedChunks += fetched
    return { fetched, failed }
  }

  /** The chunk's bytes, fetched and verified once however many callers ask at the same time. */
  private ensureChunk (open: OpenLayer, index: number, priority: Priority): Promise<Uint8Array> {
    const known = this.inflight.get(index)
    if (known !== undefined) {
      if (priority === 'high') known.promote()
      return known.promise
    }
    let ticket: Ticket | undefined
    let promoted = priority === 'high'
    const flight: Inflight = {
      promise: (async () => {
        const data = await this.fetchVerified(open, index, () => promoted ? 'high' : 'low', (t) => { ticket = t; if (promoted) t.promote() })
        await this.store(open, index, data)
        return data
      })(),
      promote: () => { promoted = true; ticket?.promote() }
    }
    this.inflight.set(index, flight)
    const done = (): void => { if (this.inflight.get(index) === flight) this.inflight.delete(index) }
    flight.promise.then(done, done)
    return flight.promise
  }

  /** Fetches a chunk and checks it; a bad copy is discarded and fetched once more. */
  private async fetchVerified (open: OpenLayer, index: number, priority: () => Priority, onTicket: (t: Ticket) => void): Promise<Uint8Array> {
    const want = open.hashes.subarray(index * 32, index * 32 + 32)
    for (let attempt = 1; ; attempt++) {
      const data = await this.fetchOnce(index, priority(), onTicket)
      if (createHash('sha256').update(data).digest().equals(want)) return data
      this.ctx.counters.corruptChunks++
      this.ctx.corruptChunk(this.digest, index, attempt)
      if (attempt >= 2) {
        throw blobError('corrupt', `chunk ${index} of ${this.digest} does not match its manifest (fetched ${attempt} times)`, { digest: this.digest, chunk: index })
      }
    }
  }

  private async fetchOnce (index: number, priority: Priority, onTicket: (t: Ticket) => void): Promise<Uint8Array> {
    const what = { digest: this.digest, chunk: index }
    try {
      const data = await withDeadline(this.ctx.fetchTimeoutMs, this.ctx.signal, what, async (signal) => {
        // The deadline covers the wait for a slot too: a sandbox's read is bounded in all.
        const ticket = this.ctx.limiter.acquire(priority, signal)
        onTicket(ticket)
        const release = await ticket.granted
        try {
          return await fetchChunk(this.ctx.source, this, index, signal)
        } finally {
          release()
        }
      })
      this.ctx.counters.bytesFetched += data.length
      this.ctx.counters.chunksFetched++
      return data
    } catch (err) {
      const e = err as WarrenError
      if (e.details?.reason !== 'closed') {
        this.ctx.counters.fetchFailures++
        this.ctx.fetchFailed(this.digest, index, e)
      }
      throw err
    }
  }

  /**
   * Writes a verified chunk and marks it present; durability (fdatasync, then the bitmap byte)
   * follows in the background so the reader is answered without waiting for the disk.
   */
  private async store (open: OpenLayer, index: number, data: Uint8Array): Promise<void> {
    try {
      await open.files.writeChunk(index * this.chunkBytes, data)
    } catch (err) {
      // The reader still gets its bytes; the chunk is simply fetched again next time.
      this.ctx.persistFailed(this.digest, index, err as Error)
      return
    }
    if (this.present[index] === 1) return
    this.present[index] = 1
    this.presentBytes += data.length
    this.ctx.grew(data.length)
    const durable = open.files.markDurable(index).catch((err: Error) => {
      // Bytes whose durability is unknown are not trusted: forget the chunk.
      if (this.present[index] === 1) {
        this.present[index] = 0
        this.presentBytes -= data.length
        this.ctx.grew(-data.length)
      }
      this.ctx.persistFailed(this.digest, index, err)
    })
    this.background.add(durable)
    durable.then(() => this.background.delete(durable), () => this.background.delete(durable))
  }

  private chunkLength (index: number): number {
    const { start, end } = chunkSpan(this, index)
    return end - start
  }
}
