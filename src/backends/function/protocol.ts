/**
 * The messages between the node's main thread and a function worker (function modules; `js`
 * calls go to child processes, see js/protocol.ts). A call travels as a
 * piscina task carrying its own MessagePort; output and the abort request travel on that port,
 * so chunks reach the caller while the function runs instead of with the final reply.
 */
import type { MessagePort } from 'node:worker_threads'

/** What the worker needs to start, passed once as piscina `workerData`. */
export interface WorkerBootData {
  /** File URLs imported before the worker reports ready. */
  preload: string[]
}

/** Fields every call carries. */
interface CallTaskBase {
  /** The call's own channel: worker → main output, main → worker abort. */
  port: MessagePort
  args: string[]
  stdin: Uint8Array
  env: Record<string, string>
  /** Cap on stdout + stderr bytes together; the worker drops the rest. */
  maxOutputBytes: number
  /** The call's time limit. */
  timeoutMs: number
}

/** Run a function module's default export. */
export interface ModuleTask extends CallTaskBase {
  op: 'module'
  /** For messages only. */
  name: string
  /** File URL of the module, with a version query so an edited file is loaded afresh. */
  url: string
}

export type WorkerTask = ModuleTask

/** The worker's answer when a call ends without its worker dying. */
export interface WorkerReply {
  exitCode: number
  /** True when the worker dropped output beyond the cap. */
  truncated: boolean
}

/** Worker → main, on the call's port. */
export type WorkerPortMessage =
  | { t: 'started' }
  | { t: 'out', fd: 1 | 2, data: Uint8Array }

/** Main → worker, on the call's port: the call is being cut; `ctx.signal` aborts. */
export interface AbortPortMessage {
  t: 'abort'
  reason: 'timeout' | 'killed'
}

/** Worker → main on the worker's parentPort once its start-up (preload) is done. */
export const READY_MESSAGE = Object.freeze({ warren: 'function-worker-ready' })

/** True when `msg` is `READY_MESSAGE`, as it arrives after cloning. */
export function isReadyMessage (msg: unknown): boolean {
  return typeof msg === 'object' && msg !== null && (msg as { warren?: unknown }).warren === READY_MESSAGE.warren
}
