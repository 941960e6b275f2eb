/**
 * The child side of one call's output: writers that send each chunk to the node at once over
 * the IPC channel, under the call's cap. The child counts too, so a runaway writer cannot
 * flood the channel (or its own memory with queued messages) past the cap.
 */
import type { OutputWriter } from '../context.js'
import { createOutputBudget, toBytes } from '../output.js'
import type { ChildMessage } from './protocol.js'
import type { JsOutput } from './run-js.js'

/** A call's output, child side. */
export interface ChildCallIo extends JsOutput {
  /** True once output was dropped. */
  readonly truncated: boolean
  /** Ends the call's output; later writes are dropped. */
  close (): void
}

/**
 * Opens the output of call `id`.
 * @param send posts a message to the node; must not throw
 */
export function openChildIo (id: number, maxOutputBytes: number, send: (msg: ChildMessage) => void): ChildCallIo {
  const budget = createOutputBudget(maxOutputBytes)
  let closed = false

  function writer (fd: 1 | 2): OutputWriter {
    return {
      write (data) {
        const bytes = toBytes(data)
        const n = closed ? 0 : budget.take(bytes.byteLength)
        // The IPC serializer copies only the bytes a view covers, never the rest of its buffer
        // (Node's shared pool for small strings), so a subarray is safe to send.
        if (n > 0) send({ t: 'out', id, fd, data: n === bytes.byteLength ? bytes : bytes.subarray(0, n) })
        return n === bytes.byteLength
      }
    }
  }

  return {
    stdout: writer(1),
    stderr: writer(2),
    get truncated () { return budget.truncated },
    close () { closed = true }
  }
}
