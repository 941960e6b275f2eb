/**
 * One `js` call, node side: hands the request to the process pool, streams the child's output
 * to the caller's callbacks under the output cap, enforces the time limit, and turns however
 * the call ended into an ExecResult (as `../call.ts` does for module calls).
 *
 * Cutting: a kill (or a callback that throws) kills the child at once: sandboxed code has no
 * abort signal to heed. A timeout leaves the child `abortGraceMs` to answer, since its sandbox
 * cuts the evaluation at the same deadline and the child can then be reused; one that has not
 * answered by then is killed. Either way the result says what cut it.
 */
import type { ExecResult } from '../../types.js'
import type { CallOptions, RunningCall } from '../call.js'
import { createOutputBudget } from '../output.js'
import { cutMessage, endedBy } from '../result.js'
import type { JsEnd, JsPool, JsPoolRequest } from './pool.js'

/** A `js` call as the backend builds it (with its tenant); the time limit comes from `CallOptions`. */
export type JsCallRequest = Omit<JsPoolRequest, 'deadline' | 'maxOutputBytes'>

/** Starts a call on `pool`. */
export function startJsCall (pool: JsPool, request: JsCallRequest, options: CallOptions): RunningCall {
  const startedAt = performance.now()
  const budget = createOutputBudget(options.maxOutputBytes)
  let cut: 'timeout' | 'killed' | undefined
  let callbackError: { error: unknown } | undefined
  let graceTimer: NodeJS.Timeout | undefined

  const onOutput = (fd: 1 | 2, data: Uint8Array): void => {
    if (callbackError !== undefined) return
    const n = budget.take(data.byteLength)
    if (n === 0) return
    // An exact copy: what arrives is a view into the IPC read buffer, which can be Node's shared
    // pool (unrelated data of the node) or hold other messages, and a consumer may pass `.buffer` on.
    const chunk = new Uint8Array(data.subarray(0, n))
    try {
      (fd === 1 ? options.onStdout : options.onStderr)?.(chunk)
    } catch (error) {
      callbackError = { error }
      cutCall('killed')
    }
  }

  const ticket = pool.submit({
    ...request,
    maxOutputBytes: options.maxOutputBytes,
    deadline: startedAt + options.timeoutMs
  }, onOutput)

  function cutCall (reason: 'timeout' | 'killed'): void {
    if (cut !== undefined) return
    cut = reason
    if (reason === 'killed' || !ticket.started) ticket.cancel()
    else graceTimer = setTimeout(() => ticket.cancel(), options.abortGraceMs)
  }

  const timer = setTimeout(() => cutCall('timeout'), options.timeoutMs)
  const onAbort = (): void => cutCall('killed')
  if (options.signal?.aborted === true) onAbort()
  else options.signal?.addEventListener('abort', onAbort, { once: true })

  const finish = (): void => {
    clearTimeout(timer)
    clearTimeout(graceTimer)
    options.signal?.removeEventListener('abort', onAbort)
  }

  const result = ticket.result.then((end: JsEnd): ExecResult => {
    finish()
    if (callbackError !== undefined) throw callbackError.error
    const durationMs = performance.now() - startedAt
    const truncated = budget.truncated || (end.kind === 'done' && end.truncated)
    // A cut wins even if the child managed to answer during the grace period.
    if (cut !== undefined) return endedBy(cut, durationMs, truncated, cutMessage(cut, options.timeoutMs))
    switch (end.kind) {
      case 'done':
        return end.timedOut
          ? endedBy('timeout', durationMs, truncated, cutMessage('timeout', options.timeoutMs))
          : { exitCode: end.exitCode, durationMs, truncated }
      case 'died':
        return endedBy(end.reason, durationMs, truncated, end.message)
      case 'cancelled':
        // Only a cut cancels; reaching here would be a pool bug, reported as a kill.
        return endedBy('killed', durationMs, truncated, 'killed')
    }
  }, (error: unknown) => {
    // The pool rejects only with coded errors (unavailable, overloaded, closed), before any output.
    finish()
    throw error
  })
  return { result, kill: () => cutCall('killed') }
}
