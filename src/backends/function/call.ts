/**
 * One function call, main-thread side: opens the call's port, submits the task, streams the
 * worker's output to the caller's callbacks under the output cap, enforces the time limit,
 * and turns however the call ended into an ExecResult.
 *
 * Cutting a call (timeout, kill) first aborts the function's `ctx.signal`; a function still
 * running `abortGraceMs` later has its worker terminated, which also stops a synchronous
 * infinite loop. Either way the result says what cut it.
 */
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads'
import { isWarrenError, createError, ErrorCodes } from '../../errors.js'
import type { ExecEndReason, ExecResult } from '../types.js'
import { createOutputBudget } from './output.js'
import type { SupervisedPool } from './pool.js'
import type { AbortPortMessage, WorkerPortMessage, WorkerTask } from './protocol.js'
import { cutMessage, endedBy } from './result.js'

/** A task as the backend builds it; the call adds the port. */
export type CallTask = WorkerTask extends infer T ? T extends WorkerTask ? Omit<T, 'port'> : never : never

/** How to run one call. */
export interface CallOptions {
  timeoutMs: number
  abortGraceMs: number
  maxOutputBytes: number
  onStdout?: (chunk: Uint8Array) => void
  onStderr?: (chunk: Uint8Array) => void
  signal?: AbortSignal
}

/** A call in flight. */
export interface RunningCall {
  /** How the call ended; rejects only when it could not run (a coded error) or a callback threw. */
  readonly result: Promise<ExecResult>
  /** Cuts the call as killed (exit code 137). Idempotent; the first cut wins. */
  kill (): void
}

/** Starts a call on `pool`. */
export function startCall (pool: SupervisedPool, task: CallTask, options: CallOptions): RunningCall {
  const startedAt = performance.now()
  const { port1, port2 } = new MessageChannel()
  const budget = createOutputBudget(options.maxOutputBytes)
  let started = false
  let cut: 'timeout' | 'killed' | undefined
  let callbackError: { error: unknown } | undefined
  let graceTimer: NodeJS.Timeout | undefined

  const onMessage = (msg: WorkerPortMessage): void => {
    if (msg.t === 'started') {
      started = true
      return
    }
    if (msg.t !== 'out' || callbackError !== undefined) return
    const n = budget.take(msg.data.byteLength)
    if (n === 0) return
    const chunk = n === msg.data.byteLength ? msg.data : msg.data.subarray(0, n)
    try {
      (msg.fd === 1 ? options.onStdout : options.onStderr)?.(chunk)
    } catch (error) {
      callbackError = { error }
      cutCall('killed')
    }
  }
  /** Takes every message the worker has already sent, in order (they may not have been emitted yet). */
  const drain = (): void => {
    for (let m = receiveMessageOnPort(port1); m !== undefined; m = receiveMessageOnPort(port1)) {
      onMessage(m.message as WorkerPortMessage)
    }
  }
  port1.on('message', onMessage)

  const ticket = pool.submit({ ...task, port: port2 } as WorkerTask, () => {
    drain()
    return started
  })

  function cutCall (reason: 'timeout' | 'killed'): void {
    if (cut !== undefined) return
    cut = reason
    drain()
    // A call still waiting for a worker has no function to warn: take it out of the queue now.
    if (!started) {
      ticket.abort()
      return
    }
    const msg: AbortPortMessage = { t: 'abort', reason }
    try { port1.postMessage(msg) } catch {}
    graceTimer = setTimeout(() => ticket.abort(), options.abortGraceMs)
  }

  const timer = setTimeout(() => cutCall('timeout'), options.timeoutMs)
  const onAbort = (): void => cutCall('killed')
  if (options.signal?.aborted === true) onAbort()
  else options.signal?.addEventListener('abort', onAbort, { once: true })

  const result = ticket.result.then(
    (reply) => ({ ok: true as const, reply }),
    (error: unknown) => ({ ok: false as const, error })
  ).then((outcome) => {
    clearTimeout(timer)
    clearTimeout(graceTimer)
    options.signal?.removeEventListener('abort', onAbort)
    // Output the worker sent before it replied or died is already queued on the port.
    drain()
    port1.close()
    if (callbackError !== undefined) throw callbackError.error

    const durationMs = performance.now() - startedAt
    const truncated = budget.truncated || (outcome.ok && outcome.reply.truncated)
    const end = (reason: ExecEndReason, message?: string): ExecResult => endedBy(reason, durationMs, truncated, message)

    // A cut wins even if the function managed to return during its grace period.
    if (cut !== undefined) return end(cut, cutMessage(cut, options.timeoutMs))
    if (outcome.ok) return { exitCode: outcome.reply.exitCode, durationMs, truncated }
    const error = outcome.error
    if (isWarrenError(error)) throw error
    if ((error as NodeJS.ErrnoException | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      return end('oom', 'the function ran out of memory (worker resource limits)')
    }
    if (started) return end('crashed', `the function's worker died: ${messageOf(error)}`)
    // The worker died before it began this call: not the call's doing.
    throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `no worker could start the call: ${messageOf(error)}`,
      { reason: 'worker-start-failed' })
  })
  return { result, kill: () => cutCall('killed') }
}

function messageOf (error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
