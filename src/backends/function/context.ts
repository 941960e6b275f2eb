/**
 * The contract between the function backend and a function module. A module in the functions
 * directory default-exports a `FunctionHandler`:
 *
 * ```js
 * export default async (ctx) => {
 *   ctx.stdout.write(`hello ${ctx.args[0] ?? 'world'}\n`)
 *   return 0
 * }
 * ```
 *
 * Modules are trusted code (the operator installs them) and run with full Node access inside a
 * worker thread shared with later calls: they must not leave timers or other work running after
 * they return. Untrusted code belongs in the built-in `js` function or a stronger backend.
 */

/** One output stream as a function sees it. */
export interface OutputWriter {
  /**
   * Sends `data` (a string is sent as UTF-8) to the caller now. Returns false when some of it
   * was dropped because the call's output cap is reached.
   */
  write (data: string | Uint8Array): boolean
}

/** What a function gets for one call. */
export interface FunctionContext {
  /** argv after the function name. */
  readonly args: readonly string[]
  /** The call's standard input, whole. */
  readonly stdin: Uint8Array
  /** The sandbox's environment with the call's laid over it (not the worker's process.env). */
  readonly env: Readonly<Record<string, string>>
  readonly stdout: OutputWriter
  readonly stderr: OutputWriter
  /**
   * Aborts when the call is cut (timeout or kill). The function then has the backend's
   * `abortGraceMs` to return before its worker is terminated.
   */
  readonly signal: AbortSignal
}

/**
 * A function: resolves to its exit code (0–255; undefined means 0). Throwing or rejecting
 * prints the error to stderr and ends the call with exit code 1.
 */
export type FunctionHandler = (ctx: FunctionContext) => number | undefined | void | Promise<number | undefined | void>
