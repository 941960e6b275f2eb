/**
 * The function backend: sandboxes that are only a name and an environment (creating one starts
 * nothing), whose commands are calls of JavaScript functions. argv[0] names the function.
 * Function modules (trusted) run in the node's shared, supervised worker pool; `js`, the
 * built-in evaluator of untrusted code, runs in a pool of child processes (`js/`), because
 * only a process boundary holds against every way of exhausting a V8 heap.
 */
import { randomUUID } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import { checkTimeoutBound, type Backend, type ExecOptions, type ExecResult, type SandboxHandle, type SandboxSpec } from '../types.js'
import { startCall, type CallOptions, type CallTask, type RunningCall } from './call.js'
import { resolveOptions, type FunctionBackendOptions, type ResolvedFunctionBackendOptions } from './defaults.js'
import { startJsCall, type JsCallRequest } from './js/call.js'
import { JsJailDefaults } from './js/jail.js'
import { createJsPool, type JsPoolStatus } from './js/pool.js'
import { createSupervisedPool, type PoolStatus } from './pool.js'
import { createFunctionRegistry } from './registry.js'
import { noFiles } from './no-files.js'

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
  /** The worker pool of function modules. */
  pool: PoolStatus
  /** The process pool of `js` calls. */
  js: JsPoolStatus
  /** Live sandboxes. */
  sandboxes: number
  /** Calls in flight (running or waiting for a worker). */
  calls: number
}

interface SandboxState {
  /** Whose sandbox it is: `js` processes are shared fairly between tenants (none: not held to a share). */
  tenant: string | undefined
  env: Record<string, string>
  calls: Set<RunningCall>
}

/** What a call runs: a module on the worker pool, or untrusted source in a `js` process. */
type Work = { kind: 'module', task: CallTask } | { kind: 'js', request: JsCallRequest }

/**
 * Makes a function backend, its worker pool and its `js` process pool.
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
  const jsPool = createJsPool({
    minProcesses: opts.jsMinProcesses,
    maxProcesses: opts.jsMaxProcesses,
    callsPerProcess: opts.jsCallsPerProcess,
    startTimeoutMs: opts.jsStartTimeoutMs,
    idleTimeoutMs: opts.idleTimeoutMs,
    maxQueue: opts.maxQueue,
    tenantShare: opts.jsTenantShare ?? Math.ceil(opts.jsMaxProcesses / 2),
    heap: {
      maxOldGenerationSizeMb: opts.resourceLimits.maxOldGenerationSizeMb,
      maxYoungGenerationSizeMb: opts.resourceLimits.maxYoungGenerationSizeMb
    },
    jail: { ...JsJailDefaults, isolation: opts.jsIsolation, uid: opts.jsUid, gid: opts.jsGid },
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

  async function buildWork (tenant: string | undefined, argv: readonly string[], env: Record<string, string>, stdin: Uint8Array,
    timeoutMs: number, maxOutputBytes: number): Promise<Work> {
    const fn = await registry.resolve(argv[0]!)
    if (fn.kind === 'module') {
      return { kind: 'module', task: { op: 'module', name: fn.name, url: fn.url, args: argv.slice(1), stdin, env, timeoutMs, maxOutputBytes } }
    }
    const source = argv[1]
    if (typeof source !== 'string') {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: js SOURCE [ARG...]')
    }
    return { kind: 'js', request: { ...(tenant !== undefined ? { tenant } : {}), source, args: argv.slice(2), stdin, env } }
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
    maxTimeoutMs: opts.maxTimeoutMs,

    async create (spec: SandboxSpec = {}) {
      if (closed) throw closedError()
      const env = checkEnv(spec.env, 'spec.env')
      const id = `fn-${randomUUID()}`
      sandboxes.set(id, { tenant: spec.tenant, env, calls: new Set() })
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
      checkTimeoutBound(timeoutMs, opts.maxTimeoutMs)
      if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 0) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, 'maxOutputBytes must be a non-negative integer')
      }
      if (execOpts.stdin !== undefined && !(execOpts.stdin instanceof Uint8Array)) {
        throw createError(ErrorCodes.UNSUPPORTED, 'function sandboxes take stdin only up front, as bytes')
      }
      // An exact copy: cloning a view sends its whole backing buffer, which for a small Buffer
      // is Node's shared pool holding unrelated data of this process.
      const stdin = execOpts.stdin === undefined ? new Uint8Array(0) : new Uint8Array(execOpts.stdin)
      const env = { ...sandbox.env, ...checkEnv(execOpts.env, 'env') }

      const work = await buildWork(sandbox.tenant, argv, env, stdin, timeoutMs, maxOutputBytes)
      // The sandbox may have been killed while the function was looked up.
      if (sandboxes.get(handle.id) !== sandbox) throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${handle.id} is gone`, { id: handle.id })

      const callOptions: CallOptions = {
        timeoutMs,
        maxOutputBytes,
        abortGraceMs: opts.abortGraceMs,
        onStdout: execOpts.onStdout,
        onStderr: execOpts.onStderr,
        signal: execOpts.signal
      }
      const call = work.kind === 'js' ? startJsCall(jsPool, work.request, callOptions) : startCall(pool, work.task, callOptions)
      sandbox.calls.add(call)
      try {
        return await call.result
      } finally {
        sandbox.calls.delete(call)
      }
    },

    files: noFiles,

    async kill (handle: SandboxHandle) {
      if (handle?.kind !== 'function') return
      await killSandbox(handle.id)
    },

    async close () {
      if (closed) return
      closed = true
      await Promise.allSettled([...sandboxes.keys()].map(killSandbox))
      await Promise.all([pool.close(), jsPool.close()])
    },

    functions: async () => await registry.list(),

    status () {
      let calls = 0
      for (const s of sandboxes.values()) calls += s.calls.size
      return { pool: pool.status(), js: jsPool.status(), sandboxes: sandboxes.size, calls }
    }
  }
}

/** Node timers fire at once for delays above this, so no time option may exceed it. */
const MAX_TIMER_MS = 2 ** 31 - 1

function checkPositive (value: unknown, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${name} must be a positive number of ms up to ${MAX_TIMER_MS}`, { field: name, [name]: String(value) })
  }
}

/** A call longer than the node allows is refused, not clamped: the caller learns the bound. */

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
  if (!Number.isInteger(o.jsMinProcesses) || o.jsMinProcesses < 0) bad('jsMinProcesses must be an integer >= 0')
  if (!Number.isInteger(o.jsMaxProcesses) || o.jsMaxProcesses < 1) bad('jsMaxProcesses must be an integer >= 1')
  if (o.jsMinProcesses > o.jsMaxProcesses) bad('jsMinProcesses must not exceed jsMaxProcesses')
  if (o.jsIsolation !== 'jail' && o.jsIsolation !== 'none') bad("jsIsolation must be 'jail' or 'none'")
  for (const key of ['jsUid', 'jsGid'] as const) {
    if (!Number.isInteger(o[key]) || o[key] <= 0 || o[key] >= 2 ** 32 - 1) bad(`${key} must be an integer id other than 0 (root)`)
  }
  if (!Number.isInteger(o.jsCallsPerProcess) || o.jsCallsPerProcess < 1) bad('jsCallsPerProcess must be an integer >= 1')
  for (const key of ['maxOldGenerationSizeMb', 'maxYoungGenerationSizeMb'] as const) {
    const v = o.resourceLimits[key]
    // These become node flags of the js processes; a bad value would keep every one from starting.
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)) bad(`resourceLimits.${key} must be a positive number`)
  }
  if (!Number.isInteger(o.maxQueue) || o.maxQueue < 1) bad('maxQueue must be an integer >= 1')
  if (o.jsTenantShare !== undefined && (!Number.isInteger(o.jsTenantShare) || o.jsTenantShare < 1)) bad('jsTenantShare must be an integer >= 1')
  if (o.timeoutMs > o.maxTimeoutMs) bad('timeoutMs must not exceed maxTimeoutMs')
  for (const key of ['timeoutMs', 'maxTimeoutMs', 'restartBackoffMs', 'restartBackoffMaxMs', 'jsStartTimeoutMs'] as const) checkPositive(o[key], key)
  if (typeof o.abortGraceMs !== 'number' || !(o.abortGraceMs >= 0) || o.abortGraceMs > MAX_TIMER_MS) bad('abortGraceMs must be 0..2^31-1')
  if (!Number.isInteger(o.maxOutputBytes) || o.maxOutputBytes < 0) bad('maxOutputBytes must be an integer >= 0')
}
