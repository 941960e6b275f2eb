/**
 * The function backend: sandboxes that are only a name and an environment (creating one starts
 * nothing), whose commands are calls of JavaScript functions in the node's shared, supervised
 * worker pool. argv[0] names the function; `js` is the built-in sandboxed evaluator.
 */
import { randomUUID } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import type { Backend, ExecOptions, ExecResult, SandboxHandle, SandboxSpec } from '../types.js'
import { startCall, type CallTask, type RunningCall } from './call.js'
import { resolveOptions, type FunctionBackendOptions, type ResolvedFunctionBackendOptions } from './defaults.js'
import { createSupervisedPool, type PoolStatus } from './pool.js'
import { createFunctionRegistry } from './registry.js'

/** The function backend's own additions to `Backend`. */
export interface FunctionBackend extends Backend {
  readonly kind: 'function'
  /** Names callable now (the built-in `js` and the modules in the functions directory). */
  functions (): Promise<string[]>
  /** Pool and sandbox figures, for capacity reports and tests. */
  status (): FunctionBackendStatus
}

/** A snapshot of the backend. */
export interface FunctionBackendStatus {
  pool: PoolStatus
  /** Live sandboxes. */
  sandboxes: number
  /** Calls in flight (running or waiting for a worker). */
  calls: number
}

interface SandboxState {
  env: Record<string, string>
  calls: Set<RunningCall>
}

/**
 * Makes a function backend and its worker pool.
 * @param options see `FunctionBackendOptions`; defaults in `FunctionBackendDefaults`
 */
export function createFunctionBackend (options: FunctionBackendOptions = {}): FunctionBackend {
  const opts = resolveOptions(options)
  validateOptions(opts)
  const registry = createFunctionRegistry(opts.functionsDir)
  const pool = createSupervisedPool({
    minThreads: opts.minThreads,
    maxThreads: opts.maxThreads,
    idleTimeoutMs: opts.idleTimeoutMs,
    maxQueue: opts.maxQueue,
    resourceLimits: opts.resourceLimits,
    preload: opts.preload.map((p) => isAbsolute(p) ? pathToFileURL(p).href : p),
    restartBackoffMs: opts.restartBackoffMs,
    restartBackoffMaxMs: opts.restartBackoffMaxMs
  })
  const sandboxes = new Map<string, SandboxState>()
  let closed = false

  const closedError = (): WarrenError =>
    createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the function backend is closed', { reason: 'closed' })

  function sandboxOf (handle: SandboxHandle): SandboxState {
    if (closed) throw closedError()
    if (handle?.kind !== 'function') {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'not a function sandbox handle', { kind: String(handle?.kind) })
    }
    const sandbox = sandboxes.get(handle.id)
    if (sandbox === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${handle.id} is gone`, { id: handle.id })
    return sandbox
  }

  async function buildTask (argv: readonly string[], env: Record<string, string>, stdin: Uint8Array,
    timeoutMs: number, maxOutputBytes: number): Promise<CallTask> {
    const fn = await registry.resolve(argv[0]!)
    const base = { stdin, env, timeoutMs, maxOutputBytes }
    if (fn.kind === 'module') return { op: 'module', name: fn.name, url: fn.url, args: argv.slice(1), ...base }
    const source = argv[1]
    if (typeof source !== 'string') {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: js SOURCE [ARG...]')
    }
    return { op: 'js', source, args: argv.slice(2), ...base }
  }

  async function killSandbox (id: string): Promise<void> {
    const sandbox = sandboxes.get(id)
    if (sandbox === undefined) return
    sandboxes.delete(id)
    const calls = [...sandbox.calls]
    for (const call of calls) call.kill()
    await Promise.allSettled(calls.map(async (c) => await c.result))
  }

  return {
    kind: 'function',

    async create (spec: SandboxSpec = {}) {
      if (closed) throw closedError()
      const env = checkEnv(spec.env, 'spec.env')
      const id = `fn-${randomUUID()}`
      sandboxes.set(id, { env, calls: new Set() })
      return { id, kind: 'function' }
    },

    async exec (handle: SandboxHandle, argv: readonly string[], execOpts: ExecOptions = {}): Promise<ExecResult> {
      const sandbox = sandboxOf(handle)
      if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, 'argv must be a non-empty array of strings')
      }
      const timeoutMs = execOpts.timeoutMs ?? opts.timeoutMs
      const maxOutputBytes = execOpts.maxOutputBytes ?? opts.maxOutputBytes
      checkPositive(timeoutMs, 'timeoutMs')
      if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 0) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, 'maxOutputBytes must be a non-negative integer')
      }
      if (execOpts.stdin !== undefined && !(execOpts.stdin instanceof Uint8Array)) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, 'stdin must be a Uint8Array')
      }
      // An exact copy: cloning a view sends its whole backing buffer, which for a small Buffer
      // is Node's shared pool holding unrelated data of this process.
      const stdin = execOpts.stdin === undefined ? new Uint8Array(0) : new Uint8Array(execOpts.stdin)
      const env = { ...sandbox.env, ...checkEnv(execOpts.env, 'env') }

      const task = await buildTask(argv, env, stdin, timeoutMs, maxOutputBytes)
      // The sandbox may have been killed while the function was looked up.
      if (sandboxes.get(handle.id) !== sandbox) throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${handle.id} is gone`, { id: handle.id })

      const call = startCall(pool, task, {
        timeoutMs,
        maxOutputBytes,
        abortGraceMs: opts.abortGraceMs,
        onStdout: execOpts.onStdout,
        onStderr: execOpts.onStderr,
        signal: execOpts.signal
      })
      sandbox.calls.add(call)
      try {
        return await call.result
      } finally {
        sandbox.calls.delete(call)
      }
    },

    files: {
      async read () {
        throw createError(ErrorCodes.UNSUPPORTED, 'function sandboxes have no files', { backend: 'function' })
      },
      async write () {
        throw createError(ErrorCodes.UNSUPPORTED, 'function sandboxes have no files', { backend: 'function' })
      }
    },

    async kill (handle: SandboxHandle) {
      if (handle?.kind !== 'function') return
      await killSandbox(handle.id)
    },

    async close () {
      if (closed) return
      closed = true
      await Promise.allSettled([...sandboxes.keys()].map(killSandbox))
      await pool.close()
    },

    functions: async () => await registry.list(),

    status () {
      let calls = 0
      for (const s of sandboxes.values()) calls += s.calls.size
      return { pool: pool.status(), sandboxes: sandboxes.size, calls }
    }
  }
}

/** Node timers fire at once for delays above this, so no time option may exceed it. */
const MAX_TIMER_MS = 2 ** 31 - 1

function checkPositive (value: unknown, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${name} must be a positive number of ms up to ${MAX_TIMER_MS}`, { [name]: String(value) })
  }
}

function checkEnv (env: unknown, name: string): Record<string, string> {
  if (env === undefined) return {}
  if (env === null || typeof env !== 'object' || !Object.values(env).every((v) => typeof v === 'string')) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${name} must map names to strings`)
  }
  return { ...(env as Record<string, string>) }
}

function validateOptions (o: ResolvedFunctionBackendOptions): void {
  const bad = (msg: string): never => { throw createError(ErrorCodes.INVALID_ARGUMENT, `function backend: ${msg}`) }
  if (!Number.isInteger(o.minThreads) || o.minThreads < 0) bad('minThreads must be an integer >= 0')
  if (!Number.isInteger(o.maxThreads) || o.maxThreads < 1) bad('maxThreads must be an integer >= 1')
  if (o.minThreads > o.maxThreads) bad('minThreads must not exceed maxThreads')
  if (!Number.isInteger(o.maxQueue) || o.maxQueue < 1) bad('maxQueue must be an integer >= 1')
  for (const key of ['timeoutMs', 'restartBackoffMs', 'restartBackoffMaxMs'] as const) checkPositive(o[key], key)
  if (typeof o.abortGraceMs !== 'number' || !(o.abortGraceMs >= 0) || o.abortGraceMs > MAX_TIMER_MS) bad('abortGraceMs must be 0..2^31-1')
  if (!Number.isInteger(o.maxOutputBytes) || o.maxOutputBytes < 0) bad('maxOutputBytes must be an integer >= 0')
}
