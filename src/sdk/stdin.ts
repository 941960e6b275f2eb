/**
 * A spawned command's stdin on the trainer's side. Writes go out in order, each piece tagged
 * with the byte offset it starts at, so one retried after a dropped connection is taken once.
 * A write refused because the command has not read enough yet (WARREN_ERR_OVERLOADED) waits
 * the hinted time and goes again: `write` resolves when the sandbox holds the bytes, which is
 * the writer's backpressure. Once the command has ended, writes resolve and go nowhere.
 */
import { ErrorCodes, isWarrenError } from '../errors.js'
import type { StdinAck } from '../cluster/index.js'
import type { ExecTransport } from './exec.js'
import { retryPause, worthRetrying } from './request-errors.js'

export const StdinWriterDefaults = {
  /** Largest piece one request carries. */
  pieceBytes: 256 * 1024,
  requestTimeoutMs: 10_000,
  /** Lost requests (timeouts, reconnects) retried before a write fails. */
  maxRetries: 30
}

export class StdinWriter {
  private offset = 0
  private closed = false
  private queue: Promise<void>
  /** Why the command did not start, if it did not: every write then fails with it. */
  private startError: unknown

  /** @param started resolves once the command runs (writes wait for it) */
  constructor (private readonly t: ExecTransport, private readonly sandboxId: string, private readonly execId: string, started: Promise<unknown>) {
    this.queue = started.then(() => {}, (err: unknown) => { this.startError = err ?? new Error('the command did not start') })
  }

  /** Sends `data`; resolves when the sandbox has taken it (or the command has ended). */
  write (data: Uint8Array): Promise<void> {
    return this.enqueue(async () => {
      for (let at = 0; at < data.length && !this.closed; at += StdinWriterDefaults.pieceBytes) {
        await this.send(data.subarray(at, at + StdinWriterDefaults.pieceBytes), false)
      }
    })
  }

  /** Ends the input: the command reads EOF after what was written. */
  end (): Promise<void> {
    return this.enqueue(async () => { if (!this.closed) await this.send(undefined, true) })
  }

  private enqueue (work: () => Promise<void>): Promise<void> {
    const run = this.queue.then(async () => {
      if (this.startError !== undefined) throw this.startError
      await work()
    })
    this.queue = run.catch(() => {})
    return run
  }

  private async send (piece: Uint8Array | undefined, eof: boolean): Promise<void> {
    let lost = 0
    for (;;) {
      try {
        const ack = await this.t.request<StdinAck>({
          type: 'stdin', id: this.sandboxId, execId: this.execId, offset: this.offset,
          ...(piece !== undefined ? { data: piece } : {}), ...(eof ? { eof: true } : {})
        }, StdinWriterDefaults.requestTimeoutMs)
        if (ack.closed) this.closed = true
        else this.offset += piece?.length ?? 0
        return
      } catch (err) {
        // The command started (writes wait for that), so an unknown command is one that ended
        // and whose output was all read: like a closed pipe.
        if (isWarrenError(err, ErrorCodes.NOT_FOUND)) { this.closed = true; return }
        if (isWarrenError(err, ErrorCodes.OVERLOADED)) { await retryPause(err, 1); continue }
        if (!worthRetrying(err, this.t) || ++lost > StdinWriterDefaults.maxRetries) throw err
        await retryPause(err, lost)
      }
    }
  }
}
