/**
 * Results of calls that did not end on their own, shared by the worker-pool calls (`call.ts`)
 * and the `js` process calls (`js/call.ts`) so both report a cut or a death the same way.
 */
import type { ExecEndReason, ExecResult } from '../types.js'
import { ExitCodes } from './exit-codes.js'

/** The exit code reported for each way a call can be cut or lost. */
const EXIT_FOR: Record<ExecEndReason, number> = {
  timeout: ExitCodes.TIMEOUT,
  killed: ExitCodes.KILLED,
  crashed: ExitCodes.CRASHED,
  oom: ExitCodes.KILLED
}

/** The result of a call ended by `reason`, with the exit code that reason reserves. */
export function endedBy (reason: ExecEndReason, durationMs: number, truncated: boolean, message?: string): ExecResult {
  return message === undefined
    ? { exitCode: EXIT_FOR[reason], durationMs, truncated, reason }
    : { exitCode: EXIT_FOR[reason], durationMs, truncated, reason, message }
}

/** The message of a call cut by its time limit or by a kill. */
export function cutMessage (reason: 'timeout' | 'killed', timeoutMs: number): string {
  return reason === 'timeout' ? `timed out after ${timeoutMs} ms` : 'killed'
}
