/**
 * The agent protocol, TypeScript side. The format is defined in agent/protocol.h; this file
 * mirrors it (a test compares the limits with the header):
 *
 *   frame = 4-byte big-endian length N (1..maxFrameBytes) + N bytes of one msgpack map
 *
 * Every map has `t` (the kind); requests carry `id`, which replies echo. Requests: ping, exec,
 * stdin, credit, kill, resize, read, write, list, stat, remove, mkdir, rename, symlink, hostname,
 * identity, tree, execs, attach, ack. Replies
 * and events: ok, err, started, out, taken, exit.
 */
import { Packr, Unpackr } from 'msgpackr'
import { createError, ErrorCodes } from '../../errors.js'
import type { WireName } from '../../file-names.js'

/** Limits the agent enforces; the same numbers as agent/protocol.h. */
export const AgentLimits = {
  version: 2,
  maxFrameBytes: 16 * 1024 * 1024 + 64 * 1024,
  maxFileBytes: 16 * 1024 * 1024,
  defaultMaxOutputBytes: 16 * 1024 * 1024,
  maxListEntries: 10000,
  maxArgs: 4096,
  maxPath: 4096,
  maxConns: 64,
  maxExecs: 1024,
  maxTag: 64,
  retainMaxBytes: 8 * 1024 * 1024,
  /** Streamed stdin a client keeps sent and not yet taken (version 2). */
  stdinWindowBytes: 1024 * 1024,
  /** Stdin the agent holds for one exec at most: past it, it closes the exec's stdin. */
  stdinMaxBytes: 4 * 1024 * 1024,
  retainExitMs: 10 * 60 * 1000,
  /** The agent writes a message into 512 bytes; more than this was not written by it. */
  maxErrorChars: 512,
  /** A file name (NAME_MAX): longer was not listed by the agent. */
  maxNameBytes: 255
} as const

/** Client -> agent. Optional fields are left out, never sent as undefined. */
export type AgentRequest =
  | { t: 'ping', id: number }
  | {
    t: 'exec', id: number, argv: string[], cwd?: string, env?: Record<string, string>, uid?: number, gid?: number,
    stdin?: Uint8Array, stdinStream?: boolean, timeoutMs?: number, maxOutputBytes?: number,
    /** Output credit: out data stops after this many bytes until `credit` grants more. */
    window?: number
    /** Run on a pseudo-terminal of `cols` x `rows` (default 80 x 24): all output is fd 1. */
    pty?: boolean, cols?: number, rows?: number
    /** Resumable: outlives this connection, its output kept until acknowledged (`attach`, `ack`). */
    retain?: boolean
    /** With `retain`: the host's name for it (listed by `execs`), up to `maxTag` bytes. */
    tag?: string
  }
  /** Lists the agent's resumable execs: ok {execs: AgentRetainedExec[]}. */
  | { t: 'execs', id: number }
  /** Binds resumable exec `id` to this connection: started, its kept out frames from `seq`, then as an exec. */
  | { t: 'attach', id: number, seq?: number, window?: number }
  /** Frames of resumable exec `id` below `seq` are had for good (past its exit's seq: the end too). */
  | { t: 'ack', id: number, seq: number }
  | { t: 'stdin', id: number, data?: Uint8Array, eof?: boolean }
  /** Grants an exec started with `window` this many more bytes of output (no reply). */
  | { t: 'credit', id: number, bytes: number }
  | { t: 'kill', id: number, exec: number, signal?: number }
  /** Gives the terminal of an exec started with `pty` a new size. */
  | { t: 'resize', id: number, exec: number, cols: number, rows: number }
  | { t: 'read', id: number, path: WireName, offset?: number, length?: number }
  /** Without append or offset the file is replaced; with offset the bytes go there, nothing is truncated. */
  | { t: 'write', id: number, path: WireName, data: Uint8Array, mode?: number, append?: boolean, offset?: number, mkdirs?: boolean }
  | { t: 'list', id: number, path: WireName }
  | { t: 'stat', id: number, path: WireName, follow?: boolean }
  | { t: 'remove', id: number, path: WireName, recursive?: boolean }
  /** `parents`: mkdir -p (an existing directory is success). */
  | { t: 'mkdir', id: number, path: WireName, mode?: number, parents?: boolean }
  /** rename(2): atomic within a file system. */
  | { t: 'rename', id: number, path: WireName, to: WireName }
  /** Makes `path` a symlink holding `target` as given. */
  | { t: 'symlink', id: number, path: WireName, target: WireName, mkdirs?: boolean }
  | { t: 'hostname', id: number, name: string }
  /** A VM's fresh identity: a name, randomness for its kernel's pool, the time (seed and timeMs: VMs only). */
  | { t: 'identity', id: number, name?: string, seed?: Uint8Array, timeMs?: number }
  /** A VM's writable layer (or, `flatten`, its whole tree) as a pax tar: replies as an exec's. */
  | { t: 'tree', id: number, flatten?: boolean, window?: number, maxOutputBytes?: number }

/** One resumable exec as `execs` lists it. */
export interface AgentRetainedExec {
  id: number
  tag: string
  pid: number
  /** The seq its next out frame will have. */
  seq: number
  /** Frames below this were acknowledged: `attach` can resend from here on. */
  acked: number
  ended: boolean
  attached: boolean
}

/** Agent -> client. */
export type AgentMessage =
  | { t: 'ok', id: number, [field: string]: unknown }
  /** `field`: the request field that caused it (an exec's `cwd`, `user` for its uid/gid, `pty`). */
  | { t: 'err', id: number, code: string, message: string, field?: string }
  | { t: 'started', id: number, pid: number }
  | { t: 'out', id: number, seq: number, fd: 1 | 2, data: Uint8Array }
  /** Streamed stdin the command's pipe took; `closed`: its stdin is gone (version 2). */
  | { t: 'taken', id: number, bytes: number, closed?: boolean }
  | {
    t: 'exit', id: number, seq: number, code?: number, signal?: number, timedOut: boolean, truncated: boolean,
    killed: boolean, durationMs: number
  }

// Plain maps, no msgpackr records or structure tables: the agent's decoder is a plain msgpack one.
const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' })

/**
 * Encodes one request as a frame (length prefix included). Fields set to undefined are left out:
 * msgpackr would encode them as an extension the agent does not read.
 * @throws WARREN_ERR_FRAME_TOO_LARGE when the body is over `AgentLimits.maxFrameBytes`
 */
export function encodeFrame (msg: AgentRequest, maxFrameBytes: number = AgentLimits.maxFrameBytes): Buffer {
  const plain: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(msg)) if (v !== undefined) plain[k] = v
  const body = packr.pack(plain)
  if (body.length > maxFrameBytes) {
    throw createError(ErrorCodes.FRAME_TOO_LARGE, `${msg.t} frame of ${body.length} bytes exceeds the limit of ${maxFrameBytes}`, {
      kind: msg.t, size: body.length, limit: maxFrameBytes
    })
  }
  const frame = Buffer.allocUnsafe(4 + body.length)
  frame.writeUInt32BE(body.length, 0)
  frame.set(body, 4)
  return frame
}

/**
 * Cuts a byte stream into frames and decodes them. Chunks are kept as they came and joined once
 * per frame, so a 16 MiB frame arriving in 64 KiB pieces is copied once, not 256 times.
 */
export class FrameReader {
  private chunks: Buffer[] = []
  private buffered = 0

  constructor (private readonly maxFrameBytes: number = AgentLimits.maxFrameBytes) {}

  /**
   * Adds bytes; returns the messages completed by them, in order.
   * @throws WARREN_ERR_FRAME_TOO_LARGE or WARREN_ERR_MALFORMED_FRAME: the stream cannot be trusted after either
   */
  push (chunk: Buffer): AgentMessage[] {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    const out: AgentMessage[] = []
    for (;;) {
      if (this.buffered < 4) return out
      const n = this.take(4, false).readUInt32BE(0)
      if (n === 0 || n > this.maxFrameBytes) {
        throw createError(n === 0 ? ErrorCodes.MALFORMED_FRAME : ErrorCodes.FRAME_TOO_LARGE,
          `agent sent a frame of ${n} bytes (limit ${this.maxFrameBytes})`, { size: n, limit: this.maxFrameBytes })
      }
      if (this.buffered < 4 + n) return out
      this.take(4, true)
      out.push(decodeBody(this.take(n, true)))
    }
  }

  /** The first n buffered bytes as one Buffer; consumed when `consume`. */
  private take (n: number, consume: boolean): Buffer {
    let result: Buffer
    const first = this.chunks[0]!
    if (first.length >= n) {
      result = first.subarray(0, n)
    } else {
      result = Buffer.allocUnsafe(n)
      let at = 0
      for (const c of this.chunks) {
        const k = Math.min(c.length, n - at)
        c.copy(result, at, 0, k)
        at += k
        if (at === n) break
      }
    }
    if (consume) {
      let left = n
      while (left > 0) {
        const c = this.chunks[0]!
        if (c.length <= left) { this.chunks.shift(); left -= c.length } else { this.chunks[0] = c.subarray(left); left = 0 }
      }
      this.buffered -= n
    }
    return result
  }
}

/** A count or id as the agent sends one: a safe integer from 0. */
export const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
/** An exit code or a signal number. */
const isByte = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 255

/** Decodes and shape-checks one frame body. */
export function decodeBody (body: Uint8Array): AgentMessage {
  let value: unknown
  try {
    value = unpackr.unpack(body)
  } catch (err) {
    throw createError(ErrorCodes.MALFORMED_FRAME, `undecodable frame from the agent: ${(err as Error).message}`)
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw createError(ErrorCodes.MALFORMED_FRAME, 'frame from the agent is not a map')
  }
  const m = value as Record<string, unknown>
  if (typeof m.t !== 'string' || typeof m.id !== 'number') {
    throw createError(ErrorCodes.MALFORMED_FRAME, 'frame from the agent lacks t or id')
  }
  switch (m.t) {
    case 'ok': return m as AgentMessage
    // Each field as the agent writes it: a VM's agent is the tenant's, and what it sends goes on to clients.
    case 'err':
      if (typeof m.code === 'string' && typeof m.message === 'string' && (m.field === undefined || typeof m.field === 'string')) return m as AgentMessage
      break
    case 'started':
      if (isCount(m.pid)) return m as AgentMessage
      break
    case 'out':
      if (isCount(m.seq) && (m.fd === 1 || m.fd === 2) && m.data instanceof Uint8Array) return m as AgentMessage
      break
    case 'exit':
      if (isCount(m.seq) && (isByte(m.code) || isByte(m.signal)) && isCount(m.durationMs) &&
        [m.timedOut, m.truncated, m.killed].every((b) => b === undefined || typeof b === 'boolean')) return m as AgentMessage
      break
    case 'taken':
      if (isCount(m.bytes) && (m.closed === undefined || typeof m.closed === 'boolean')) return m as AgentMessage
      break
    default:
      throw createError(ErrorCodes.UNKNOWN_FRAME_KIND, `agent sent an unknown kind ${JSON.stringify(m.t).slice(0, 40)}`)
  }
  throw createError(ErrorCodes.MALFORMED_FRAME, `malformed ${m.t} frame from the agent`)
}
