/**
 * One READ's call of the owner's `read` callback, under a deadline. Whatever the callback does —
 * reject, answer the wrong length, never answer — the request gets an answer: the bytes, or EIO.
 * A sandbox reading a layer must see an error when the store is gone, never hang.
 */
import { createError, ErrorCodes, isWarrenError, type WarrenError } from '../../errors.js'
import { Errno } from './protocol.js'
import type { Reply } from './session.js'
import type { LayerFsErrorContext, LayerRead } from './types.js'

/** READ counters, shared by every read of one mount. */
export interface ReadCounters {
  reads: number
  bytesRead: number
  readErrors: number
  readTimeouts: number
}

export interface DeadlineRead {
  read: LayerRead
  timeoutMs: number
  counters: ReadCounters
  report: (err: WarrenError, context: LayerFsErrorContext) => void
}

/**
 * Reads `length` bytes of `name` at `offset` through `d.read`.
 * @param interrupted aborted when the kernel interrupts the request; the session has then
 *        answered EINTR already, so this resolves at once and the callback's signal is aborted
 * @returns the reply; never rejects
 */
export function readWithDeadline (d: DeadlineRead, name: string, offset: number, length: number, interrupted: AbortSignal): Promise<Reply> {
  const context: LayerFsErrorContext = { op: 'READ', name, offset, length }
  const controller = new AbortController()
  return new Promise<Reply>((resolve) => {
    let settled = false
    let timer: NodeJS.Timeout | undefined
    const finish = (reply: Reply): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      interrupted.removeEventListener('abort', onInterrupt)
      resolve(reply)
    }
    const onInterrupt = (): void => {
      controller.abort(interrupted.reason)
      finish(Errno.EINTR)
    }
    if (interrupted.aborted) return onInterrupt()
    interrupted.addEventListener('abort', onInterrupt, { once: true })
    timer = setTimeout(() => {
      const err = createError(ErrorCodes.TIMEOUT, `reading ${name} at ${offset} (+${length}) took longer than ${d.timeoutMs} ms`, { name, offset, length, errno: 'EIO' })
      d.counters.readTimeouts++
      controller.abort(err)
      d.report(err, context)
      finish(Errno.EIO)
    }, d.timeoutMs)

    let pending: Promise<Uint8Array>
    try {
      pending = Promise.resolve(d.read(name, offset, length, controller.signal))
    } catch (err) {
      pending = Promise.reject(err)
    }
    pending.then((bytes) => {
      if (settled) return
      if (!(bytes instanceof Uint8Array) || bytes.byteLength !== length) {
        // Passing a short answer on would tell the kernel the file ended early (it then shrinks
        // its idea of the size); more bytes than asked are a broken callback too.
        const got = bytes instanceof Uint8Array ? `${bytes.byteLength} bytes` : typeof bytes
        d.counters.readErrors++
        d.report(createError(ErrorCodes.INTERNAL, `reading ${name} at ${offset} returned ${got}, not ${length}`, { name, offset, length, errno: 'EIO' }), context)
        return finish(Errno.EIO)
      }
      d.counters.reads++
      d.counters.bytesRead += length
      finish([bytes])
    }, (err: unknown) => {
      if (settled) return
      d.counters.readErrors++
      d.report(asWarrenError(err, name, offset, length), context)
      finish(Errno.EIO)
    })
  })
}

/** The error reported for a failed read: the callback's own WarrenError, or one wrapping what it threw. */
function asWarrenError (err: unknown, name: string, offset: number, length: number): WarrenError {
  if (isWarrenError(err)) return err
  const message = err instanceof Error ? err.message : String(err)
  return createError(ErrorCodes.INTERNAL, `reading ${name} at ${offset} (+${length}) failed: ${message}`, { name, offset, length, errno: 'EIO' })
}
