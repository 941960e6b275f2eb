/**
 * The function backend, public face. See docs/design.md ("Sandboxes and backends") and
 * `backend.ts`; function modules implement `FunctionHandler` (see `context.ts`).
 *
 * Exit codes (also `ExitCodes`): the function's own 0–255; 1 when it throws; 124 timeout;
 * 126 module cannot be loaded; 134 its worker crashed (reason 'crashed'); 137 killed or out of
 * memory (reason 'killed' / 'oom'). An unknown function name is not an exit code: `exec`
 * rejects with WARREN_ERR_NOT_FOUND, as it rejects with WARREN_ERR_BACKEND_UNAVAILABLE when
 * the pool cannot run the call and WARREN_ERR_OVERLOADED when too many calls wait.
 *
 * Untrusted code (`js`) runs in a pool of child processes whose V8 heap limit is exact: any
 * way of exhausting it ends only that process, and the call with reason 'oom' (see js/). Function
 * modules are trusted and run in worker threads, whose resourceLimits Node enforces only on a
 * best-effort basis (nodejs/node#47224): some allocation patterns there abort the whole node.
 */
export { createFunctionBackend, type FunctionBackend, type FunctionBackendStatus } from './backend.js'
export { FunctionBackendDefaults, type FunctionBackendOptions, type WorkerResourceLimits } from './defaults.js'
export { ExitCodes } from './exit-codes.js'
export type { FunctionContext, FunctionHandler, OutputWriter } from './context.js'
export type { PoolStatus } from './pool.js'
export type { JsPoolStatus } from './js/pool.js'
export { JS_FUNCTION } from './registry.js'
