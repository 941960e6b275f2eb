/**
 * Helpers of the function backend tests: function modules written to a temporary directory
 * (real modules, loaded by real workers), output collectors, and backends closed by `defer`.
 */
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createFunctionBackend, type FunctionBackend, type FunctionBackendOptions } from '../../../src/backends/function/index.js'
import type { Cleanup } from '../../support/index.js'

/** Modules the tests use, by name; each is the source of `NAME.mjs`. */
export const FIXTURES: Record<string, string> = {
  echo: `export default async (ctx) => {
    ctx.stdout.write('args=' + JSON.stringify(ctx.args) + '\\n')
    ctx.stdout.write(ctx.stdin)
    ctx.stderr.write('GREETING=' + ctx.env.GREETING + ' SHARED=' + ctx.env.SHARED + '\\n')
    ctx.stderr.write('host-env-keys=' + Object.keys(process.env).length + '\\n')
  }`,
  exit: 'export default (ctx) => Number(ctx.args[0])',
  throws: `export default async () => { throw new Error('kaput') }`,
  nodefault: 'export const notAFunction = 1',
  broken: 'export default async (ctx) => { this is not javascript',
  badexit: `export default async () => 'nope'`,
  rejectlater: `export default async () => { Promise.reject(new Error('forgotten')); return 0 }`,
  interleave: `export default async (ctx) => {
    for (let i = 0; i < 5; i++) {
      ctx.stdout.write('out' + i + '\\n')
      await new Promise((r) => setImmediate(r))
      ctx.stderr.write('err' + i + '\\n')
    }
  }`,
  // Writes "waiting", then waits for the file named by args[0] to exist.
  gate: `import { access } from 'node:fs/promises'
  export default async (ctx) => {
    ctx.stdout.write('waiting\\n')
    for (;;) {
      if (await access(ctx.args[0]).then(() => true, () => false)) break
      await new Promise((r) => setTimeout(r, 5))
    }
    ctx.stdout.write('released\\n')
    return 0
  }`,
  loop: 'export default () => { for (;;) {} }',
  whoami: `import { threadId } from 'node:worker_threads'
  export default (ctx) => { ctx.stdout.write(String(threadId)) }`,
  cooperative: `export default async (ctx) => {
    ctx.stdout.write('waiting\\n')
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
    ctx.stdout.write('aborted:' + ctx.signal.reason + '\\n')
    return 5
  }`,
  crash: 'export default () => { process.exit(3) }',
  throwlater: `export default async () => {
    setTimeout(() => { throw new Error('async boom') }, 0)
    await new Promise(() => {})
  }`,
  hog: `export default async () => {
    const hoard = []
    for (;;) hoard.push(new Array(100000).fill(hoard.length))
  }`,
  // Writes args[1] chunks of args[0] bytes, alternating stdout and stderr when args[2] is 'both'.
  flood: `export default async (ctx) => {
    const size = Number(ctx.args[0]), count = Number(ctx.args[1])
    let kept = 0
    for (let i = 0; i < count; i++) {
      const out = ctx.args[2] === 'both' && i % 2 === 1 ? ctx.stderr : ctx.stdout
      if (out.write(String.fromCharCode(97 + (i % 26)).repeat(size))) kept++
    }
    return kept
  }`
}

/** Writes `files` (name → source) as NAME.mjs into a new temporary directory, removed at the end. */
export async function functionsDir (defer: Cleanup['defer'], files: Record<string, string> = FIXTURES): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'warren-fn-'))
  defer(async () => await rm(dir, { recursive: true, force: true }))
  for (const [name, source] of Object.entries(files)) await writeFile(join(dir, `${name}.mjs`), source)
  return dir
}

/** Makes a backend over the fixtures (unless `functionsDir` is given) and closes it at the end. */
export async function openBackend (defer: Cleanup['defer'], options: FunctionBackendOptions = {}): Promise<FunctionBackend> {
  const dir = options.functionsDir === undefined ? await functionsDir(defer) : options.functionsDir
  const backend = createFunctionBackend({ ...options, functionsDir: dir })
  defer(async () => await backend.close())
  return backend
}

/** Output callbacks that record every chunk in arrival order. */
export function collector (): {
  onStdout: (chunk: Uint8Array) => void
  onStderr: (chunk: Uint8Array) => void
  events: Array<[stream: 'out' | 'err', text: string]>
  stdout: () => string
  stderr: () => string
  bytes: () => number
} {
  const decoder = new TextDecoder()
  const events: Array<['out' | 'err', string]> = []
  let bytes = 0
  const text = (stream: 'out' | 'err'): string => events.filter(([s]) => s === stream).map(([, t]) => t).join('')
  return {
    onStdout: (chunk) => { bytes += chunk.byteLength; events.push(['out', decoder.decode(chunk)]) },
    onStderr: (chunk) => { bytes += chunk.byteLength; events.push(['err', decoder.decode(chunk)]) },
    events,
    stdout: () => text('out'),
    stderr: () => text('err'),
    bytes: () => bytes
  }
}

/** Resolves to the error `promise` rejects with; fails when it resolves. */
export async function rejection (promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error('expected a rejection')
}

/**
 * True while process `pid` exists and is not a zombie (a killed child whose parent has not
 * reaped it yet, e.g. an orphan waiting for init, is dead for every purpose here).
 */
export function isAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
  try {
    // /proc/PID/stat: "PID (COMM) STATE …"; COMM may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    // No /proc (not Linux), or the process went away between the two looks.
    return existsSync(`/proc/${pid}`) || process.platform !== 'linux'
  }
}
