/**
 * One command's output on the trainer's side. The pump pulls pages from the sandbox by sequence
 * number — asking for the next page only when fewer than `highWaterBytes` wait unread, which is
 * the consumer's credit — and survives a dropped connection: after a reconnect it asks again
 * from the next number it has not seen, so no chunk is lost or repeated.
 */
import { createError, ErrorCodes } from '../errors.js'
import type { OutputChunk, OutputPage } from '../cluster/index.js'
import type { ExecResult } from '../backends/types.js'
import { worthRetrying } from './request-errors.js'

/** A chunk as the SDK hands it out. */
export interface ExecChunk { stream: 'stdout' | 'stderr', data: Uint8Array }

/** How the SDK talks to its session (kept small so exec does not depend on the client). */
export interface ExecTransport {
  request<R> (message: unknown, timeoutMs: number): Promise<R>
  /** Resolves at the next reconnect (one promise shared by every caller until then); outstanding pulls are then asked again. */
  reconnected (): Promise<void>
  /** True once the client was closed: nothing is retried after that. */
  closed (): boolean
}

export const ExecDefaults = {
  highWaterBytes: 4 * 1024 * 1024,
  readWaitMs: 2000,
  /** Extra time a request gets beyond the read wait. */
  marginMs: 5000,
  /** Transient failures (timeouts, a reconnecting link) a pull retries before it gives up. */
  maxRetries: 30
}

export class ExecPump {
  private nextSeq = 0
  private readonly buffer: ExecChunk[] = []
  private bufferedBytes = 0
  private result: ExecResult | undefined
  private error: unknown
  private wake: (() => void) | undefined
  private pulling = false
  private readonly done: Promise<ExecResult>
  private settle!: (r: ExecResult) => void
  private fail!: (e: unknown) => void

  constructor (
    private readonly t: ExecTransport,
    private readonly sandboxId: string,
    readonly execId: string,
    private readonly onChunk?: (chunk: ExecChunk) => void
  ) {
    this.done = new Promise((resolve, reject) => { this.settle = resolve; this.fail = reject })
    this.done.catch(() => {})
  }

  /** Takes the first page (the answer to the exec request) and starts pulling the rest. */
  start (first: OutputPage): void {
    this.accept(first)
    this.pull()
  }

  /** Fails the pump (e.g. the exec request itself failed). */
  abort (err: unknown): void {
    if (this.result !== undefined || this.error !== undefined) return
    this.error = err
    this.fail(err)
    this.wake?.()
  }

  /** Resolves with how the command ended, once all its output has been taken. */
  wait (): Promise<ExecResult> { return this.done }

  /** The next chunk, or undefined at the end. */
  async next (): Promise<ExecChunk | undefined> {
    for (;;) {
      const chunk = this.buffer.shift()
      if (chunk !== undefined) {
        this.bufferedBytes -= chunk.data.byteLength
        this.pull()
        return chunk
      }
      if (this.error !== undefined) throw this.error
      if (this.result !== undefined) return undefined
      await new Promise<void>((resolve) => { this.wake = resolve })
      this.wake = undefined
    }
  }

  private accept (page: OutputPage): void {
    for (const c of page.chunks as OutputChunk[]) {
      if (c.seq !== this.nextSeq) continue // a page answered twice after a reconnect: keep the first copy
      this.nextSeq++
      const chunk: ExecChunk = { stream: c.stream, data: c.data }
      if (this.onChunk !== undefined) {
        try { this.onChunk(chunk) } catch (err) { this.abort(err); return }
      } else {
        this.buffer.push(chunk)
        this.bufferedBytes += chunk.data.byteLength
      }
    }
    if (page.result !== undefined && page.nextSeq <= this.nextSeq) {
      // The command has ended and all its output is here: wait() answers now, whether or not
      // the buffered chunks are read (iteration still yields them, then ends).
      this.result = page.result
      this.settle(page.result)
    }
    this.wake?.()
  }

  private pull (): void {
    if (this.pulling || this.result !== undefined || this.error !== undefined) return
    if (this.bufferedBytes >= ExecDefaults.highWaterBytes) return // no credit: the consumer pulls us on
    this.pulling = true
    void this.pullLoop().finally(() => { this.pulling = false })
  }

  private async pullLoop (): Promise<void> {
    let failures = 0
    while (this.result === undefined && this.error === undefined && this.bufferedBytes < ExecDefaults.highWaterBytes) {
      try {
        const ask = this.t.request<OutputPage>(
          { type: 'read', id: this.sandboxId, execId: this.execId, fromSeq: this.nextSeq, waitMs: ExecDefaults.readWaitMs },
          ExecDefaults.readWaitMs + ExecDefaults.marginMs)
        // A reconnect means the request may have died with the old socket: ask again at once.
        const page = await Promise.race([ask, this.t.reconnected().then(() => undefined)])
        if (page === undefined) { ask.catch(() => {}); continue }
        failures = 0
        this.accept(page)
      } catch (err) {
        if (!worthRetrying(err, this.t, true) || ++failures > ExecDefaults.maxRetries) { this.abort(err); return }
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * failures)))
      }
    }
  }
}

/** Collects a pump's output into strings, with the callbacks of `exec`. */
export function decodeAll (chunks: Uint8Array[]): string {
  return Buffer.concat(chunks).toString('utf8')
}

export function stdinNotOpen (): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, 'this command was spawned without openStdin: its stdin was given up front', { field: 'openStdin' })
}
