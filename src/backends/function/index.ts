/**
 * The function backend, public face. See DESIGN.md ("Sandboxes and backends") and
 * `backend.ts`; function modules implement `FunctionHandler` (see `context.ts`).
 *
 * Exit codes (also `ExitCodes`): the function's own 0–255; 1 when it throws; 124 timeout;
 * 126 module cannot be loaded; 134 its worker crashed (reason 'crashed'); 137 killed or out of
 * memory (reason 'killed' / 'oom'). An unknown function name is not an exit code: `exec`
 * rejects with WARREN_ERR_NOT_FOUND, as it rejects with WARREN_ERR_BACKEND_UNAVAILABLE when
 * the pool cannot run the call and WARREN_ERR_OVERLOADED when too many calls wait.
 *
 * Memory limits are worker resourceLimits, which Node enforces only on a best-effort basis:
 * some allocation patterns abort the whole process instead of the worker (see worker/run-js.ts).
 */
export { createFunctionBackend, type FunctionBackend, type FunctionBackendStatus } from './backend.js'
export { FunctionBackendDefaults, type FunctionBackendOptions, type WorkerResourceLimits } from './defaults.js'
export { ExitCodes } from './exit-codes.js'
export type { FunctionContext, FunctionHandler, OutputWriter } from './context.js'
export type { PoolStatus } from './pool.js'
export { JS_FUNCTION } from './registry.js'
