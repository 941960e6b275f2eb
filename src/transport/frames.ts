/**
 * The frames of the wire protocol and their validation.
 *
 * One frame is one msgpack map. `k` names its kind; the other keys are short because they cross
 * the wire millions of times:
 *
 * | kind      | keys                      | meaning |
 * | --------- | ------------------------- | ------- |
 * | `auth`    | `token`, `session?`, `v?` | client → server, first frame of a socket; `session` resumes one; `v` the protocol version (1 when absent) |
 * | `welcome` | `session`, `resumed`, `streams`, `v` | server → client, answer to `auth`; `streams` are the server's consumer positions |
 * | `tell`    | `to`, `m`, `from?`        | fire-and-forget message `m` for actor address `to` |
 * | `request` | `id`, `to`, `m`, `from?`, `t?` | message expecting a `reply` or `error` with the same `id`; `t` is the asker's timeout in ms |
 * | `reply`   | `id`, `m`                 | the answer to request `id` |
 * | `error`   | `id?`, `err`              | request `id` failed, or (no `id`) a frame this side sent was refused |
 * | `open`    | `sid`, `to`, `meta?`      | producer opens stream `sid` towards actor `to` |
 * | `data`    | `sid`, `seq`, `d`         | chunk `seq` (1, 2, …) of stream `sid`; `d` is binary |
 * | `end`     | `sid`, `seq`, `err?`      | the stream's last sequence number; `err` when it was aborted |
 * | `credit`  | `sid`, `ack`, `win`       | consumer: consumed through `ack`; up to `win` bytes may be unacknowledged |
 * | `cancel`  | `sid`, `err?`             | consumer abandons the stream |
 * | `resume`  | `streams`                 | client → server after a resumed `welcome`: the client's consumer positions |
 * | `ping`/`pong` |                       | heartbeat |
 * | `bye`     | `err?`                    | the session ends for good; do not resume it |
 *
 * Stream ids belong to the producer: `open`/`data`/`end` carry the producer's id, and so do the
 * consumer's `credit`/`cancel` answers. A consumer position is `[sid, lastSeq, ack, win]`.
 */
import { ErrorCodes, type ErrorCode, type WireError } from '../errors.js'

/**
 * The version of the wire protocol this code speaks (docs/protocol.md). A client names it in
 * `auth`; a server that does not speak it refuses the socket with WARREN_ERR_PROTOCOL_VERSION.
 * Raised only for changes an older peer would misread; new optional keys do not raise it.
 */
export const PROTOCOL_VERSION = 1

/** The kinds, by name. */
export const FrameKind = {
  AUTH: 'auth',
  WELCOME: 'welcome',
  TELL: 'tell',
  REQUEST: 'request',
  REPLY: 'reply',
  ERROR: 'error',
  OPEN: 'open',
  DATA: 'data',
  END: 'end',
  CREDIT: 'credit',
  CANCEL: 'cancel',
  RESUME: 'resume',
  PING: 'ping',
  PONG: 'pong',
  BYE: 'bye'
} as const

export type FrameKindName = typeof FrameKind[keyof typeof FrameKind]

/** `[sid, lastSeq, ack, win]`: what a consumer has received and acknowledged of one stream. */
export type StreamPosition = [sid: number, lastSeq: number, ack: number, win: number]

export interface AuthFrame { k: 'auth', token: string, session?: string, v?: number }
export interface WelcomeFrame { k: 'welcome', session: string, resumed: boolean, streams: StreamPosition[], v?: number }
export interface TellFrame { k: 'tell', to: string, m: unknown, from?: string }
export interface RequestFrame { k: 'request', id: number, to: string, m: unknown, from?: string, t?: number }
export interface ReplyFrame { k: 'reply', id: number, m: unknown }
export interface ErrorFrame { k: 'error', id?: number, err: WireError }
export interface OpenFrame { k: 'open', sid: number, to: string, meta?: unknown }
export interface DataFrame { k: 'data', sid: number, seq: number, d: Uint8Array }
export interface EndFrame { k: 'end', sid: number, seq: number, err?: WireError }
export interface CreditFrame { k: 'credit', sid: number, ack: number, win: number }
export interface CancelFrame { k: 'cancel', sid: number, err?: WireError }
export interface ResumeFrame { k: 'resume', streams: StreamPosition[] }
export interface PingFrame { k: 'ping' }
export interface PongFrame { k: 'pong' }
export interface ByeFrame { k: 'bye', err?: WireError }

export type Frame =
  | AuthFrame | WelcomeFrame | TellFrame | RequestFrame | ReplyFrame | ErrorFrame
  | OpenFrame | DataFrame | EndFrame | CreditFrame | CancelFrame | ResumeFrame
  | PingFrame | PongFrame | ByeFrame

/**
 * Why a decoded value is not a frame; `id` is set when the peer's request can be answered. A
 * class, not a tagged object, so no key a peer puts in a frame can make a frame look like one.
 */
export class FrameProblem {
  constructor (
    readonly code: ErrorCode,
    readonly message: string,
    readonly kind?: string,
    readonly id?: number
  ) {}
}

type Obj = Record<string, unknown>

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
/** Node timers hold 32-bit signed milliseconds; a longer timeout would fire at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1
const isTimeout = (v: unknown): v is number => isCount(v) && v <= MAX_TIMEOUT_MS
const isAddress = (v: unknown): v is string => typeof v === 'string' && v.length > 0
const isOptAddress = (v: unknown): boolean => v === undefined || isAddress(v)
const isWireError = (v: unknown): v is WireError =>
  v !== null && typeof v === 'object' && typeof (v as Obj).code === 'string' && typeof (v as Obj).message === 'string'
const isOptWireError = (v: unknown): boolean => v === undefined || isWireError(v)
const isPositions = (v: unknown): v is StreamPosition[] =>
  Array.isArray(v) && v.every((p) => Array.isArray(p) && p.length === 4 && p.every(isCount))

/**
 * Field checks per kind: the whole shape contract in one table. Each returns the name of the
 * first bad field, or undefined when the frame is well formed.
 */
const shapes: Record<FrameKindName, (f: Obj) => string | undefined> = {
  auth: (f) => typeof f.token !== 'string' ? 'token' : f.session !== undefined && typeof f.session !== 'string' ? 'session' : f.v !== undefined && !isCount(f.v) ? 'v' : undefined,
  welcome: (f) => typeof f.session !== 'string' ? 'session' : typeof f.resumed !== 'boolean' ? 'resumed' : !isPositions(f.streams) ? 'streams' : undefined,
  tell: (f) => !isAddress(f.to) ? 'to' : !isOptAddress(f.from) ? 'from' : undefined,
  request: (f) => !isCount(f.id) ? 'id' : !isAddress(f.to) ? 'to' : !isOptAddress(f.from) ? 'from' : f.t !== undefined && !isTimeout(f.t) ? 't' : undefined,
  reply: (f) => !isCount(f.id) ? 'id' : undefined,
  error: (f) => f.id !== undefined && !isCount(f.id) ? 'id' : !isWireError(f.err) ? 'err' : undefined,
  open: (f) => !isCount(f.sid) ? 'sid' : !isAddress(f.to) ? 'to' : undefined,
  data: (f) => !isCount(f.sid) ? 'sid' : !isCount(f.seq) || f.seq === 0 ? 'seq' : !(f.d instanceof Uint8Array) ? 'd' : undefined,
  end: (f) => !isCount(f.sid) ? 'sid' : !isCount(f.seq) || f.seq === 0 ? 'seq' : !isOptWireError(f.err) ? 'err' : undefined,
  credit: (f) => !isCount(f.sid) ? 'sid' : !isCount(f.ack) ? 'ack' : !isCount(f.win) ? 'win' : undefined,
  cancel: (f) => !isCount(f.sid) ? 'sid' : !isOptWireError(f.err) ? 'err' : undefined,
  resume: (f) => !isPositions(f.streams) ? 'streams' : undefined,
  ping: () => undefined,
  pong: () => undefined,
  bye: (f) => !isOptWireError(f.err) ? 'err' : undefined
}

const hasOwn = Object.prototype.hasOwnProperty

/**
 * Checks that a decoded msgpack value is a frame: a plain map whose `k` is a known kind and whose
 * fields have the kind's types. Never throws; a bad value yields a `FrameProblem`.
 * @param value what the decoder produced
 */
export function parseFrame (value: unknown): Frame | FrameProblem {
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) {
    return new FrameProblem(ErrorCodes.MALFORMED_FRAME, 'a frame must be a msgpack map')
  }
  const f = value as Obj
  const k = f.k
  if (typeof k !== 'string') return new FrameProblem(ErrorCodes.MALFORMED_FRAME, 'a frame needs a string kind "k"')
  if (!hasOwn.call(shapes, k)) {
    const shown = k.slice(0, 40)
    return new FrameProblem(ErrorCodes.UNKNOWN_FRAME_KIND, `unknown frame kind ${JSON.stringify(shown)}`, shown)
  }
  const bad = shapes[k as FrameKindName](f)
  if (bad === undefined) return f as unknown as Frame
  // Answer a broken request by its id so the asker fails fast instead of waiting for a timeout.
  const id = k === FrameKind.REQUEST && isCount(f.id) ? f.id : undefined
  return new FrameProblem(ErrorCodes.MALFORMED_FRAME, `${k} frame: missing or invalid "${bad}"`, k, id)
}
