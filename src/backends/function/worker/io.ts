/**
 * The worker side of one call's channel: output writers that stream chunks to the main thread
 * as they are written (capped), and the AbortSignal the main thread fires on timeout or kill.
 */
import type { MessagePort } from 'node:worker_threads'
import { createOutputBudget, toBytes } from '../output.js'
import type { OutputWriter } from '../context.js'
import type { AbortPortMessage, WorkerPortMessage } from '../protocol.js'

/** A call's channel, worker side. */
export interface CallIo {
  readonly stdout: OutputWriter
  readonly stderr: OutputWriter
  /** Aborts when the main thread cuts the call (timeout or kill). */
  readonly signal: AbortSignal
  /** True once output was dropped. */
  readonly truncated: boolean
  /** Releases the port; later writes are dropped. */
  close (): void
}

/** Opens the call's channel on `port` and tells the main thread the call has started. */
export function openCallIo (port: MessagePort, maxOutputBytes: number): CallIo {
  const budget = createOutputBudget(maxOutputBytes)
  const abort = new AbortController()
  let closed = false

  port.on('message', (msg: AbortPortMessage) => {
    if (msg?.t === 'abort') abort.abort(msg.reason)
  })
  post({ t: 'started' })

  function post (msg: WorkerPortMessage, transfer?: ArrayBuffer[]): void {
    if (closed) return
    try {
      port.postMessage(msg, transfer)
    } catch {
      // The main side is gone (the call was cut); output has nowhere to go.
    }
  }

  function writer (fd: 1 | 2): OutputWriter {
    return {
      write (data) {
        const bytes = toBytes(data)
        const n = budget.take(bytes.byteLength)
        if (n > 0) {
          // A fresh exact-size copy: posting a view would clone its whole backing buffer, which
          // for small strings is Node's shared pool holding unrelated data.
          const copy = new Uint8Array(n)
          copy.set(bytes.subarray(0, n))
          post({ t: 'out', fd, data: copy }, [copy.buffer])
        }
        return n === bytes.byteLength
      }
    }
  }

  return {
    stdout: writer(1),
    stderr: writer(2),
    signal: abort.signal,
    get truncated () { return budget.truncated },
    close () {
      if (closed) return
      closed = true
      port.close()
    }
  }
}
