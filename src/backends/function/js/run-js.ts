/**
 * The built-in `js` function: evaluates untrusted JavaScript with no access to the host.
 *
 * - A fresh `node:vm` context per call whose global is backed by a null-prototype object, so
 *   `this.constructor.constructor` resolves inside the sandbox, not to the host's Function.
 * - `codeGeneration: { strings: false, wasm: false }`: eval, Function and friends throw.
 * - Nothing of Node is in the context (no process, require, timers, fs); the console, args,
 *   env and stdin globals are made inside the context by `prelude.ts`.
 * - `import()` is refused with an error made in the sandbox's realm. Without
 *   --experimental-vm-modules (which every `js` child process gets) Node rejects it with a host
 *   error instead, whose constructor leads to the host's Function, so the runner refuses to run
 *   without that flag.
 * - `microtaskMode: 'afterEvaluate'`, so promise jobs run inside the time limit too.
 * - Time: vm `timeout` at the call's limit (the node's timer kills the process as a backstop).
 *   Memory: the process's own V8 heap limit (`--max-old-space-size`).
 *
 * It runs in a child process of its own (`child-main.ts`), never in the node's process: worker
 * resourceLimits are best effort, and one structure grown past them in large steps
 * (`for (;;) a.push(i)`, an ever-growing Map or object) makes V8 abort the whole process
 * ("FATAL ERROR: Reached heap limit" / "CALL_AND_RETRY_LAST"; nodejs/node#47224). In a child
 * that abort ends only the child, and the node reports the call as 'oom'.
 */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { types } from 'node:util'
import vm from 'node:vm'
import type { OutputWriter } from '../context.js'
import { ExitCodes } from '../exit-codes.js'
import { DESCRIBE_SOURCE, PRELUDE_SOURCE } from './prelude.js'
import type { JsRequest } from './protocol.js'

type Install = (write: (fd: unknown, text: unknown) => void, argsJson: string, envJson: string, stdinText: string) => (value: unknown) => void

type Evaluation = { kind: 'ok', value: unknown } | { kind: 'timeout' } | { kind: 'thrown', value: unknown }

// Compiled once per process; a Script is not tied to a context.
const prelude = new vm.Script(PRELUDE_SOURCE, { filename: 'warren:js-prelude' })
const describeScript = new vm.Script(DESCRIBE_SOURCE, { filename: 'warren:js-describe' })
const drainScript = new vm.Script('void 0', { filename: 'warren:js-drain' })
const typeErrorScript = new vm.Script('TypeError', { filename: 'warren:js-type-error' })

/** Where a call's output goes (capped writers that stream to the node). */
export interface JsOutput {
  readonly stdout: OutputWriter
  readonly stderr: OutputWriter
}

/** How a `js` call ended. */
export interface JsOutcome {
  exitCode: number
  timedOut: boolean
}

/**
 * Runs `task.source` as a classic script (argv: `js SOURCE [ARG...]`; the script sees `args`,
 * `env`, `stdin` as a string, and `console`). Exit 0, or 1 when it throws or leaves an
 * unhandled rejection (printed to stderr). `rejections` collects the process's unhandled
 * rejections while this call is current.
 */
export async function runJs (task: JsRequest, io: JsOutput, rejections: unknown[]): Promise<JsOutcome> {
  if (!process.execArgv.includes('--experimental-vm-modules')) {
    io.stderr.write('warren: js: refusing to run: this process lacks --experimental-vm-modules, without which import() would hand the sandbox a host object\n')
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
  // Taken before the script runs, so it is the sandbox's real TypeError, not one the script put there.
  const SandboxTypeError = typeErrorScript.runInContext(context) as TypeErrorConstructor

  /** Set once the script tried import(): only then can sandbox jobs be queued after its evaluation. */
  let imported = false
  const refuseImport = (): never => {
    imported = true
    throw new SandboxTypeError('import() is not available in the js sandbox')
  }
  // import() can only come from a script whose text holds the keyword `import`: a keyword cannot
  // be written with escapes (SyntaxError), and the sandbox cannot compile code at run time (no
  // eval, Function or wasm). Only such a source needs the refusing callback, which costs a lot
  // in Node 20 (registering it defeats V8's compilation cache: ~0.08 ms a call, most of a short
  // call's compile). Every other script of the context is ours and holds no import().
  const mayImport = task.source.includes('import')
  let script: vm.Script
  try {
    script = new vm.Script(task.source, mayImport ? { filename: 'js', importModuleDynamically: refuseImport } : { filename: 'js' })
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
  // on the next evaluation. Nothing else can queue sandbox jobs once an evaluation has returned
  // (its microtasks run before it returns), so a script that never tried import() skips that
  // evaluation and its timer thread. One more turn after that lets unhandled rejections be reported.
  if (imported) {
    await nextTurn()
    if (evaluate(drainScript).kind === 'timeout') return timedOut
  }
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

/**
 * A stack without the host's frames (paths of this machine are none of the sandbox's business).
 * Kept: frames of the script (`js:LINE`) and of builtins (`(<anonymous>)`, no path). A host
 * function can also be named `<anonymous>` (`at process.<anonymous> (file:…)`), so only the
 * location counts.
 */
function sandboxFrames (stack: string): string {
  return stack.split('\n').filter((line) => !/^\s+at /.test(line) || /\(js:\d|at js:\d|\(<anonymous>\)$/.test(line)).join('\n')
}

/** The text of a host error (a compile error) without the host's frames. */
function hostErrorText (err: unknown): string {
  return err instanceof Error && typeof err.stack === 'string' ? sandboxFrames(err.stack) : String(err)
}
