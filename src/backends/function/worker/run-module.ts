/** Runs one call of a function module (trusted code) in this worker. */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { inspect } from 'node:util'
import type { FunctionContext } from '../context.js'
import { ExitCodes } from '../exit-codes.js'
import type { ModuleTask } from '../protocol.js'
import type { CallIo } from './io.js'

/**
 * Imports the module and awaits its default export. `rejections` collects unhandled promise
 * rejections raised while the call runs (the worker routes them here).
 * @returns the exit code
 */
export async function runModule (task: ModuleTask, io: CallIo, rejections: unknown[]): Promise<number> {
  let handler: unknown
  try {
    handler = ((await import(task.url)) as { default?: unknown }).default
  } catch (err) {
    io.stderr.write(`warren: ${task.name}: cannot load module: ${inspect(err)}\n`)
    return ExitCodes.CANNOT_EXECUTE
  }
  if (typeof handler !== 'function') {
    io.stderr.write(`warren: ${task.name}: module has no default export function\n`)
    return ExitCodes.CANNOT_EXECUTE
  }

  const ctx: FunctionContext = Object.freeze({
    args: Object.freeze([...task.args]),
    stdin: task.stdin,
    env: Object.freeze({ ...task.env }),
    stdout: io.stdout,
    stderr: io.stderr,
    signal: io.signal
  })
  let exitCode: number
  try {
    exitCode = toExitCode(await (handler as (ctx: FunctionContext) => unknown)(ctx), task.name, io)
  } catch (err) {
    io.stderr.write(`${inspect(err)}\n`)
    exitCode = ExitCodes.FAILED
  }

  // Unhandled rejections are reported after the microtasks of the turn they happened in; one
  // more turn lets those of this call arrive while it is still the current call.
  await nextTurn()
  for (const reason of rejections) io.stderr.write(`Uncaught (in promise) ${inspect(reason)}\n`)
  if (rejections.length > 0 && exitCode === ExitCodes.OK) exitCode = ExitCodes.FAILED
  return exitCode
}

/** A handler's resolved value as an exit code: undefined → 0, an integer 0–255 as is, else 1. */
function toExitCode (value: unknown, name: string, io: CallIo): number {
  if (value === undefined || value === null) return ExitCodes.OK
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255) return value
  io.stderr.write(`warren: ${name}: returned ${inspect(value)}, not an exit code 0-255\n`)
  return ExitCodes.FAILED
}
