/**
 * The messages between the node and a `js` child process, over the child's IPC channel
 * (serialization 'advanced', so output travels as bytes). A child runs one call at a time;
 * every call message carries the call's id so a message of an earlier call can never be taken
 * for one of the current call.
 */

/** One evaluation of untrusted source, as the sandbox needs it. */
export interface JsRequest {
  /** argv[1]: the script. */
  source: string
  /** argv after the source. */
  args: string[]
  stdin: Uint8Array
  env: Record<string, string>
  /** Time left for the call when the child receives it; the sandbox cuts its evaluation there. */
  timeoutMs: number
  /** Cap on stdout + stderr bytes together; the child drops the rest. */
  maxOutputBytes: number
}

/** Node → child: run a call. */
export interface RunMessage extends JsRequest {
  t: 'run'
  id: number
}

/** Child → node. */
export type ChildMessage =
  /** Start-up is done; the child takes calls. */
  | { t: 'ready' }
  /** Output of call `id`, sent as it is written. */
  | { t: 'out', id: number, fd: 1 | 2, data: Uint8Array }
  /** Call `id` ended without the child dying. */
  | { t: 'done', id: number, exitCode: number, truncated: boolean, timedOut: boolean }

/** True when `msg` has the shape of a `ChildMessage` (it comes from another process). */
export function isChildMessage (msg: unknown): msg is ChildMessage {
  if (typeof msg !== 'object' || msg === null) return false
  const m = msg as { t?: unknown, id?: unknown, fd?: unknown, data?: unknown, exitCode?: unknown }
  switch (m.t) {
    case 'ready': return true
    case 'out': return typeof m.id === 'number' && (m.fd === 1 || m.fd === 2) && m.data instanceof Uint8Array
    case 'done': return typeof m.id === 'number' && typeof m.exitCode === 'number'
    default: return false
  }
}

/** True when `msg` is a well-formed `RunMessage` (the child checks what it is asked to run). */
export function isRunMessage (msg: unknown): msg is RunMessage {
  if (typeof msg !== 'object' || msg === null) return false
  const m = msg as Partial<Record<keyof RunMessage, unknown>>
  return m.t === 'run' && typeof m.id === 'number' && typeof m.source === 'string' &&
    Array.isArray(m.args) && m.args.every((a) => typeof a === 'string') &&
    m.stdin instanceof Uint8Array && typeof m.env === 'object' && m.env !== null &&
    typeof m.timeoutMs === 'number' && typeof m.maxOutputBytes === 'number'
}
