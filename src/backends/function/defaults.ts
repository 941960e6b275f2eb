import { availableParallelism } from 'node:os'
import { JsJailDefaults } from './js/jail.js'

/**
 * Memory and stack limits of each worker thread (piscina / worker_threads `resourceLimits`).
 * The two heap sizes also bound each `js` process (`--max-old-space-size`,
 * `--max-semi-space-size`), where V8 enforces them exactly; the code range and stack sizes
 * apply to worker threads only (a `js` process keeps V8's default stack of about 1 MB).
 */
export interface WorkerResourceLimits {
  /** Main heap; a call that needs more ends with reason 'oom'. */
  maxOldGenerationSizeMb?: number
  /** Nursery heap; small values make GC frequent, large ones waste memory per worker. */
  maxYoungGenerationSizeMb?: number
  /** Space for compiled code. */
  codeRangeSizeMb?: number
  /** Stack of the worker's main thread; deep recursion beyond it is a RangeError. */
  stackSizeMb?: number
}

/** Options of `createFunctionBackend`; every field defaults to `FunctionBackendDefaults`. */
export interface FunctionBackendOptions {
  /** Where function modules live (`NAME.js` / `NAME.mjs`); null means only the built-in `js`. */
  functionsDir?: string | null
  /**
   * Modules (paths or file URLs) each worker imports when it starts, e.g. heavy libraries that
   * many functions share. A preload that throws is a worker start failure (see the supervisor).
   */
  preload?: readonly string[]
  /** Workers kept alive even when idle; at least 1 so a crash is always replaced. */
  minThreads?: number
  /** Most workers, hence most module calls running at once on this node. */
  maxThreads?: number
  /**
   * `js` child processes kept warm even when idle (each costs a Node process, some 40 MB).
   * `js` runs untrusted code in processes, not worker threads, so that no allocation pattern
   * can abort the node (see js/run-js.ts).
   */
  jsMinProcesses?: number
  /** Most `js` processes, hence most `js` calls running at once on this node. */
  jsMaxProcesses?: number
  /**
   * How `js` processes are confined: 'jail' (namespaces, an empty read-only root, seccomp, an
   * unprivileged uid; see js/jail.ts), or 'none', a plain child process with the node's uid,
   * for measuring what the jail costs and nothing else: untrusted code escaping `vm` there
   * has the node's rights.
   */
  jsIsolation?: 'jail' | 'none'
  /**
   * Most `js` calls of one tenant running at once (default: half of `jsMaxProcesses`, rounded
   * up), so one tenant's endless loops never hold every process while another's calls wait.
   */
  jsTenantShare?: number
  /** The uid and gid `js` processes run as when the node is root. */
  jsUid?: number
  jsGid?: number
  /** A `js` process is replaced after this many calls, so nothing builds up in it for ever. */
  jsCallsPerProcess?: number
  /** A `js` process not ready this long after its start is killed and counted as a failed start. */
  jsStartTimeoutMs?: number
  /** An idle worker above `minThreads` (or `js` process above `jsMinProcesses`) is stopped after this long. */
  idleTimeoutMs?: number
  /** Calls waiting for a worker (or a `js` process) beyond this are refused with WARREN_ERR_OVERLOADED. */
  maxQueue?: number
  /** Limits of each worker, and the heap limits of each `js` process. */
  resourceLimits?: WorkerResourceLimits
  /** Time limit of a call when `exec` gives none. */
  timeoutMs?: number
  /** Longest time limit a call may ask for; a longer one is refused (INVALID_ARGUMENT, field `timeoutMs`). */
  maxTimeoutMs?: number
  /**
   * After a timeout or kill the function's `ctx.signal` aborts; a function that has not ended
   * this long after is stopped by terminating its worker. A `js` call is killed at once on a
   * kill; on a timeout its process has this long to report its own cut before it is killed.
   */
  abortGraceMs?: number
  /** Output cap (stdout + stderr) of a call when `exec` gives none. */
  maxOutputBytes?: number
  /** First wait before a broken pool is rebuilt (or `js` processes started again); doubles on each consecutive failure. */
  restartBackoffMs?: number
  /** Longest wait between rebuilds of a broken pool (or start attempts of `js` processes). */
  restartBackoffMaxMs?: number
}

/** The defaults of every option, in one place (like piscina's `kDefaultOptions`). */
export const FunctionBackendDefaults = Object.freeze({
  functionsDir: null as string | null,
  preload: Object.freeze([]) as readonly string[],
  minThreads: 1,
  maxThreads: Math.max(1, availableParallelism()),
  jsMinProcesses: 1,
  jsMaxProcesses: Math.max(1, availableParallelism()),
  jsIsolation: JsJailDefaults.isolation,
  jsTenantShare: undefined as number | undefined,
  jsUid: JsJailDefaults.uid,
  jsGid: JsJailDefaults.gid,
  jsCallsPerProcess: 10_000,
  jsStartTimeoutMs: 20_000,
  idleTimeoutMs: 30_000,
  maxQueue: 1024,
  resourceLimits: Object.freeze({
    maxOldGenerationSizeMb: 256,
    maxYoungGenerationSizeMb: 32,
    stackSizeMb: 4
  }) as Readonly<WorkerResourceLimits>,
  timeoutMs: 30_000,
  maxTimeoutMs: 60_000,
  abortGraceMs: 100,
  maxOutputBytes: 16 * 1024 * 1024,
  restartBackoffMs: 100,
  restartBackoffMaxMs: 30_000
})

/** Options with every default filled in. */
export type ResolvedFunctionBackendOptions = {
  -readonly [K in keyof typeof FunctionBackendDefaults]: (typeof FunctionBackendDefaults)[K]
}

/** Lays `options` over the defaults, ignoring fields given as undefined. */
export function resolveOptions (options: FunctionBackendOptions = {}): ResolvedFunctionBackendOptions {
  const out: ResolvedFunctionBackendOptions = { ...FunctionBackendDefaults }
  for (const [key, value] of Object.entries(options)) {
    // A field given as undefined keeps its default, as with piscina's options.
    if (value !== undefined && key in out) (out as Record<string, unknown>)[key] = value
  }
  out.resourceLimits = { ...FunctionBackendDefaults.resourceLimits, ...options.resourceLimits }
  return out
}
