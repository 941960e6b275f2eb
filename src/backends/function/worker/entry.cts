/**
 * CommonJS entry of a function worker (piscina `filename`); the worker itself is `main.ts`.
 *
 * Why CommonJS: piscina loads its `filename` with require() first, and on Node >= 20.19 that
 * loads an ES module synchronously (require(esm)). A worker terminated during that synchronous
 * load takes the whole process down (V8 fatal error "Module::IsGraphAsync must be used on an
 * instantiated module"), and the pool does terminate workers that are still starting. This
 * file is required plainly and loads the ES module with import(), which a termination
 * interrupts safely.
 *
 * It exports a Promise of the handler, which piscina documents as "initialize first": the
 * worker is given no call until `main.js` and its preloads have loaded, and when they fail
 * piscina rethrows the error and the worker dies, which the supervisor counts.
 */
import type { WorkerReply, WorkerTask } from '../protocol.js'

const handler: Promise<(task: WorkerTask) => Promise<WorkerReply>> = import('./main.js').then((main) => main.default)

export = handler
