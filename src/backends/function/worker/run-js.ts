/**
 * The built-in `js` function: evaluates untrusted JavaScript with no access to the host.
 *
 * - A fresh `node:vm` context per call whose global is backed by a null-prototype object, so
 *   `this.constructor.constructor` resolves inside the sandbox, not to the host's Function.
 * - `codeGeneration: { strings: false, wasm: false }`: eval, Function and friends throw.
 * - Nothing of Node is in the context (no process, require, timers, fs); the console, args,
 *   env and stdin globals are made inside the context by `js-prelude.ts`.
 * - `import()` is refused with an error made in the sandbox's realm. Without
 *   --experimental-vm-modules (which the pool gives every worker) Node rejects it with a host
 *   error instead, whose constructor leads to the host's Function, so the runner refuses to run
 *   without that flag.
 * - `microtaskMode: 'afterEvaluate'`, so promise jobs run inside the time limit too.
 * - Time: vm `timeout` at the call's limit (the main thread's timer terminates the worker as a
 *   backstop). Memory: the worker's resourceLimits.
 *
 * Known gap: resourceLimits are best effort in Node. Many small allocations end the worker with
 * ERR_WORKER_OUT_OF_MEMORY (reason 'oom'), but one structure grown past the limit in large
 * steps (`for (;;) a.push(i)`, an ever-growing Map or object) makes V8 abort the whole process
 * ("FATAL ERROR: Reached heap limit" / "CALL_AND_RETRY_LAST"; nodejs/node#47224). Closing it
 * needs process isolation (a child-process pool for `js`, or the container/microvm backends).
 */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { types } from 'node:util'
import vm from 'node:vm'
import { ExitCodes } from '../exit-codes.js'
import type { JsTask } from '../protocol.js'
import type { CallIo } from './io.js'
import { DESCRIBE_SOURCE, PRELUDE_SOURCE } from './js-prelude.js'

type Install = (write: (fd: unknown, text: unknown) => void, argsJson: string, envJson: string, stdinText: string) => (value: unknown) => void

type Evaluation = { kind: 'ok', value: unknown } | { kind: 'timeout' } | { kind: 'thrown', value: unknown }

// Compiled once per worker; a Script is not tied to a context.
const prelude = new vm.Script(PRELUDE_SOURCE, { filename: 'warren:js-prelude' })
const describeScript = new vm.Script(DESCRIBE_SOURCE, { filename: 'warren:js-describe' })
const drainScript = new vm.Script('void 0', { filename: 'warren:js-drain' })

/** How a `js` call ended. */
export interface JsOutcome {
  exitCode: number
  timedOut: boolean
}

/**
 * Runs `task.source` as a classic script (argv: `js SOURCE [ARG...]`; the script sees `args`,
 * `env`, `stdin` as a string, and `console`). Exit 0, or 1 when it throws or leaves an
 * unhandled rejection (printed to stderr). `rejections` collects the worker's unhandled
 * rejections while this call is current.
 */
export async function runJs (task: JsTask, io: CallIo, rejections: unknown[]): Promise<JsOutcome> {
  if (!process.execArgv.includes('--experimental-vm-modules')) {
    io.stderr.write('warren: js: refusing to run: this worker lacks --experimental-vm-modules, without which import() would hand the sandbox a host object\n')
    return { exitCode: ExitCodes.CANNOT_EXECUTE, timedOut: false }
  }
  const deadline = performance.now() + task.timeoutMs
  const context = vm.createContext(Object.create(null), {
    name: 'warren-js',
    codeGeneration: { strings: false, wasm: false },
    microtaskMode: 'afterEvaluate'
  })

  // The bridge is a host function: it must never throw (a host Error would carry the host's
  // Function into the sandbox) and never call back into sandbox code.
  const write = (fd: unknown, text: unknown): void => {
    if (typeof text !== 'string') return
    try { (fd === 2 ? io.stderr : io.stdout).write(text) } catch {}
  }
  const install = prelude.runInContext(context) as Install
  const hold = install(write, JSON.stringify(task.args), JSON.stringify(task.env), Buffer.from(task.stdin).toString('utf8'))
  const SandboxTypeError = vm.runInContext('TypeError', context) as TypeErrorConstructor

  let script: vm.Script
  try {
    script = new vm.Script(task.source, {
      filename: 'js',
      importModuleDynamically: () => { throw new SandboxTypeError('import() is not available in the js sandbox') }
    })
  } catch (err) {
    // A compile error is made by the host from the source text alone; show it without host frames.
    io.stderr.write(`${hostErrorText(err)}\n`)
    return { exitCode: ExitCodes.FAILED, timedOut: false }
  }

  const evaluate = (s: vm.Script): Evaluation => {
    const timeout = Math.floor(deadline - performance.now())
    if (timeout < 1) return { kind: 'timeout' }
    try {
      return { kind: 'ok', value: s.runInContext(context, { timeout }) }
    } catch (thrown) {
      return isTimeout(thrown) ? { kind: 'timeout' } : { kind: 'thrown', value: thrown }
    }
  }
  const timedOut: JsOutcome = { exitCode: ExitCodes.TIMEOUT, timedOut: true }

  const uncaught: Array<[prefix: string, value: unknown]> = []
  const run = evaluate(script)
  if (run.kind === 'timeout') return timedOut
  if (run.kind === 'thrown') uncaught.push(['Uncaught ', run.value])

  // A refused import() settles on the host side in a later turn; its sandbox reactions then run
  // on the next evaluation. One more turn after that lets unhandled rejections be reported.
  await nextTurn()
  if (evaluate(drainScript).kind === 'timeout') return timedOut
  await nextTurn()
  for (const reason of rejections.splice(0)) uncaught.push(['Uncaught (in promise) ', reason])

  for (const [prefix, value] of uncaught) {
    hold(value)
    const described = evaluate(describeScript)
    if (described.kind === 'timeout') return timedOut
    const text = described.kind === 'ok' && typeof described.value === 'string' ? sandboxFrames(described.value) : 'a value that cannot be printed'
    io.stderr.write(`${prefix}${text}\n`)
  }
  return { exitCode: uncaught.length > 0 ? ExitCodes.FAILED : ExitCodes.OK, timedOut: false }
}

/** True for the host error vm throws when `timeout` passes; never touches a sandbox proxy. */
function isTimeout (thrown: unknown): boolean {
  // Sandbox values are never host Errors; checking for a proxy first keeps its traps from running here.
  return !types.isProxy(thrown) && thrown instanceof Error &&
    (thrown as NodeJS.ErrnoException).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT'
}

/** A stack without the host's frames (paths of this machine are none of the sandbox's business). */
function sandboxFrames (stack: string): string {
  return stack.split('\n').filter((line) => !/^\s+at /.test(line) || /\(js:\d|at js:\d|<anonymous>/.test(line)).join('\n')
}

/** The text of a host error (a compile error) without the host's frames. */
function hostErrorText (err: unknown): string {
  return err instanceof Error && typeof err.stack === 'string' ? sandboxFrames(err.stack) : String(err)
}
