/**
 * One command's output on the trainer's side. The pump pulls pages from the sandbox by sequence
 * number — asking for the next page only when fewer than `highWaterBytes` wait unread, which is
 * the consumer's credit — and survives a dropped connection: after a reconnect it asks again
 * from the next number it has not seen, so no chunk is lost or repeated.
 */
import { createError, ErrorCodes, isWarrenError } from '../errors.js'
import type { OutputChunk, OutputPage } from '../cluster/index.js'
import type { ExecResult } from '../backends/types.js'
import { retryPause, worthRetrying } from './request-errors.js'

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
  maxRetries: 30,
  /**
   * How long pulls wait for a sandbox whose node is away (WARREN_ERR_BACKEND_UNAVAILABLE with
   * `retryAfterMs`: a node agent restarting, a control plane rebuilding its directory); the
   * command runs on meanwhile and its output resumes from the last seq.
   */
  awayWaitMs: 120_000
}

export class ExecPump {
  private nextSeq = 0
  private readonly buffer: ExecChunk[] = []
  private bufferedBytes = 0
  /** Set once every chunk has arrived after the end: iteration ends when the buffer is empty. */
  private result: ExecResult | undefined
  /** True once wait() has its answer (the end may be known before all output has arrived). */
  private ended = false
  private error: unknown
  private wake: (() => void) | undefined
  /** Wakes a status read's wait when the consumer frees room in the buffer. */
  private freed: (() => void) | undefined
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

  /** Resolves with how the command ended, whether or not its output has been read. */
  wait (): Promise<ExecResult> { return this.done }

  /** The next chunk, or undefined at the end. */
  async next (): Promise<ExecChunk | undefined> {
    for (;;) {
      const chunk = this.buffer.shift()
      if (chunk !== undefined) {
        this.bufferedBytes -= chunk.data.byteLength
        if (this.bufferedBytes < ExecDefaults.highWaterBytes) this.freed?.()
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
      // The command has ended and all its output is here: iteration yields what is buffered, then ends.
      this.result = page.result
      this.end(page.result)
    } else if (page.ended !== undefined) {
      // Ended, with output still on the node: wait() answers; iteration goes on pulling it.
      this.end(page.ended)
    }
    this.wake?.()
  }

  private end (result: ExecResult): void {
    this.ended = true
    this.settle(result)
  }

  private full (): boolean { return this.bufferedBytes >= ExecDefaults.highWaterBytes }

  private pull (): void {
    if (this.pulling || this.result !== undefined || this.error !== undefined) return
    if (this.full() && this.ended) return // nothing left to learn: the consumer pulls us on
    this.pulling = true
    void this.pullLoop().finally(() => { this.pulling = false })
  }

  /**
   * Pulls pages while the buffer has room. When it is full, the consumer's credit is spent and
   * no chunk is taken; status reads (maxBytes 0) then learn when the command ends, so wait()
   * answers however slowly the output is read, and the node keeps holding the rest.
   */
  private async pullLoop (): Promise<void> {
    let failures = 0
    let awaySince: number | undefined
    while (this.result === undefined && this.error === undefined) {
      const full = this.full()
      if (full && this.ended) return
      try {
        const ask = this.t.request<OutputPage>(
          { type: 'read', id: this.sandboxId, execId: this.execId, fromSeq: this.nextSeq, waitMs: ExecDefaults.readWaitMs, ...(full ? { maxBytes: 0 } : {}) },
          ExecDefaults.readWaitMs + ExecDefaults.marginMs)
        // A reconnect means the request may have died with the old socket: ask again at once;
        // room freed during a status read means chunks may be taken again: ask for them.
        const wakeups: Array<Promise<OutputPage | undefined>> = [ask, this.t.reconnected().then(() => undefined)]
        if (full) wakeups.push(new Promise((resolve) => { this.freed = () => resolve(undefined) }))
        const page = await Promise.race(wakeups)
        this.freed = undefined
        if (page === undefined) { ask.catch(() => {}); continue }
        failures = 0
        awaySince = undefined
        this.accept(page)
      } catch (err) {
        if (awayRetry(err, this.t) && Date.now() - (awaySince ??= Date.now()) < ExecDefaults.awayWaitMs) {
          await retryPause(err, 1)
          continue
        }
        if (!worthRetrying(err, this.t, true) || ++failures > ExecDefaults.maxRetries) { this.abort(err); return }
        await retryPause(err, failures)
      }
    }
  }
}

/** A read answered "the sandbox's node is away, ask again" (the control plane's rejoin window). */
function awayRetry (err: unknown, t: ExecTransport): boolean {
  return !t.closed() && isWarrenError(err, ErrorCodes.BACKEND_UNAVAILABLE) && typeof err.details?.retryAfterMs === 'number'
}

/** Collects a pump's output into strings, with the callbacks of `exec`. */
export function decodeAll (chunks: Uint8Array[]): string {
  return Buffer.concat(chunks).toString('utf8')
}

export function stdinNotOpen (): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, 'this command was spawned without openStdin: its stdin was given up front', { field: 'openStdin' })
}
