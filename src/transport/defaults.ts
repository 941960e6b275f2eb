/**
 * Every default of the transport, in one object (like piscina's `kDefaults`), so a reader sees
 * all the knobs at once and a test can override exactly the ones it needs.
 */
import { createError, ErrorCodes } from '../errors.js'

/** Reconnect backoff of a client link: delay n = min(maxDelayMs, minDelayMs * factor^n) ± jitter. */
export interface ReconnectOptions {
  /** Delay before the first reconnect attempt. */
  minDelayMs: number
  /** Ceiling of the delay, however many attempts failed. */
  maxDelayMs: number
  /** Growth of the delay per failed attempt. */
  factor: number
  /** Spread of each delay as a fraction (0.5 = delay × [0.5, 1.5], never past `maxDelayMs`). */
  jitter: number
  /** Consecutive failed attempts after which the link closes for good. */
  maxAttempts: number
}

/** The tunables of a link, client or server side. Each option of `createLinkServer`/`createLinkClient` falls back to these. */
export interface LinkOptions {
  /** Largest encoded frame, in bytes, sent or accepted. Larger: `WARREN_ERR_FRAME_TOO_LARGE`. */
  maxFrameBytes: number
  /**
   * Largest WebSocket message (ws `maxPayload`). A message holds several coalesced frames. ws
   * closes the connection (code 1009) on a larger one before it is buffered, so no error frame
   * can precede that close. Must be at least `maxFrameBytes` and `batchBytes`.
   */
  maxMessageBytes: number
  /** A batch of coalesced frames is sent as soon as it holds this many bytes, without waiting for the tick's end. */
  batchBytes: number
  /** Above this many buffered bytes, writes and tells return false until 'drain'. */
  highWaterMark: number
  /** 'drain' is emitted once buffered bytes fall to this level. */
  lowWaterMark: number
  /** Hard cap on buffered outgoing bytes (socket + queued): beyond it sends throw `WARREN_ERR_OVERLOADED`. */
  maxBufferedBytes: number
  /** Default time a request waits for its reply. */
  askTimeoutMs: number
  /** Requests this side may have waiting for a reply at once; more reject with `WARREN_ERR_OVERLOADED`. */
  maxInflightRequests: number
  /** Requests from the peer being handled at once; more are answered with `WARREN_ERR_OVERLOADED`. */
  maxIncomingRequests: number
  /** Open streams per direction (this side producing, and this side consuming). */
  maxStreams: number
  /** Credit window a consumer grants, in payload bytes (credit is counted in bytes, not chunks). */
  streamWindowBytes: number
  /** Largest payload of one data frame; larger writes are split. */
  streamChunkBytes: number
  /** The consumer acknowledges (and so re-grants credit) after consuming this fraction of its window. */
  streamAckFraction: number
  /**
   * How far past its credit a producer that ignores `write() === false` may go before `write`
   * throws `WARREN_ERR_OVERLOADED`: the safety net that keeps a careless producer bounded.
   */
  streamOverrunBytes: number
  /** A heartbeat tick: a ping is sent when nothing was heard from the peer during one. */
  heartbeatIntervalMs: number
  /** Nothing heard for this long: the peer is dead and the socket is terminated (detected within timeout + interval). */
  heartbeatTimeoutMs: number
  /**
   * Time allowed from socket open to a completed auth handshake (server: from the TCP accept,
   * so a slow upgrade request counts too). Short: a real client needs one round trip.
   */
  authTimeoutMs: number
  /**
   * Server: connections that may be open and not yet authenticated at once. Past the bound the
   * one that has waited longest is dropped (1013, try again later), never the newcomer, so
   * idle connections can neither exhaust the server nor keep a real client out.
   */
  maxUnauthenticated: number
  /** Server: the same bound per source address, the oldest of that address dropped first. */
  maxUnauthenticatedPerAddress: number
  /**
   * Server: sockets open at once from one source address, whatever they became (links, plain
   * HTTP, TLS handshakes); past it the newcomer is refused (socket-bounds.ts).
   */
  maxSocketsPerAddress: number
  /** Server: sockets open at once in all (keep it below the process's open-file limit). */
  maxSockets: number
  /** Server: a plain HTTP exchange on a link server's port idle this long is ended (a reader that stopped reading). */
  httpIdleMs: number
  /** Server: how long a session whose socket dropped waits for its client to resume it. */
  sessionLingerMs: number
  /**
   * Frames one WebSocket message may hold. Each costs a turn of the one event loop every link
   * shares, so a message of a million tiny frames would stall every other link: past the bound
   * the link is closed (`WARREN_ERR_PROTOCOL_VIOLATION`, close code 1008).
   */
  maxFramesPerMessage: number
  /**
   * Frames the peer sent that this side refused (malformed, out of turn, too large), a second
   * sustained and in a burst: past them the link is closed with `WARREN_ERR_PROTOCOL_VIOLATION`.
   * A working peer sends none; one that keeps sending them only costs the others.
   */
  maxRefusalsPerSecond: number
  refusalBurst: number
  /** Client: backoff between reconnect attempts. */
  reconnect: ReconnectOptions
}

const KiB = 1024
const MiB = 1024 * KiB

/** The defaults; frozen so nobody changes them for everyone by accident. */
export const transportDefaults: Readonly<LinkOptions> = Object.freeze({
  maxFrameBytes: 1 * MiB,
  maxMessageBytes: 8 * MiB,
  batchBytes: 256 * KiB,
  highWaterMark: 1 * MiB,
  lowWaterMark: 256 * KiB,
  maxBufferedBytes: 64 * MiB,
  askTimeoutMs: 5000,
  maxInflightRequests: 4096,
  maxIncomingRequests: 4096,
  maxStreams: 256,
  streamWindowBytes: 1 * MiB,
  streamChunkBytes: 256 * KiB,
  streamAckFraction: 0.25,
  streamOverrunBytes: 1 * MiB,
  heartbeatIntervalMs: 5000,
  heartbeatTimeoutMs: 15_000,
  authTimeoutMs: 3000,
  maxUnauthenticated: 1024,
  maxUnauthenticatedPerAddress: 64,
  maxSocketsPerAddress: 1024,
  maxSockets: 16_384,
  httpIdleMs: 60_000,
  sessionLingerMs: 30_000,
  maxFramesPerMessage: 10_000,
  maxRefusalsPerSecond: 100,
  refusalBurst: 1000,
  reconnect: Object.freeze({ minDelayMs: 100, maxDelayMs: 10_000, factor: 2, jitter: 0.5, maxAttempts: Infinity })
})

/** Partial options as callers pass them; `reconnect` may itself be partial. */
export type LinkOptionsInput = Partial<Omit<LinkOptions, 'reconnect'>> & { reconnect?: Partial<ReconnectOptions> }

/**
 * Merges caller options over the defaults and checks the relations between them, so a bad
 * combination fails at creation instead of as a mysterious stall later.
 * @throws WARREN_ERR_INVALID_ARGUMENT on an inconsistent combination
 */
export function resolveLinkOptions (input: LinkOptionsInput = {}): LinkOptions {
  const defined = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as LinkOptionsInput
  const o: LinkOptions = { ...transportDefaults, ...defined, reconnect: { ...transportDefaults.reconnect, ...input.reconnect } }
  const problems: string[] = []
  if (o.maxMessageBytes < o.maxFrameBytes) problems.push('maxMessageBytes < maxFrameBytes')
  if (o.maxMessageBytes < o.batchBytes) problems.push('maxMessageBytes < batchBytes')
  if (o.lowWaterMark > o.highWaterMark) problems.push('lowWaterMark > highWaterMark')
  if (o.maxBufferedBytes < o.highWaterMark) problems.push('maxBufferedBytes < highWaterMark')
  // A data frame is the chunk plus a small header; leave room for it.
  if (o.streamChunkBytes + 256 > o.maxFrameBytes) problems.push('streamChunkBytes + 256 > maxFrameBytes')
  if (o.streamWindowBytes <= 0) problems.push('streamWindowBytes <= 0')
  if (!(o.streamAckFraction > 0 && o.streamAckFraction <= 1)) problems.push('streamAckFraction outside (0, 1]')
  if (o.heartbeatTimeoutMs < o.heartbeatIntervalMs) problems.push('heartbeatTimeoutMs < heartbeatIntervalMs')
  if (o.reconnect.minDelayMs > o.reconnect.maxDelayMs) problems.push('reconnect.minDelayMs > reconnect.maxDelayMs')
  if (!(Number.isInteger(o.maxUnauthenticated) && o.maxUnauthenticated > 0)) problems.push('maxUnauthenticated is not a positive integer')
  if (!(Number.isInteger(o.maxUnauthenticatedPerAddress) && o.maxUnauthenticatedPerAddress > 0)) problems.push('maxUnauthenticatedPerAddress is not a positive integer')
  for (const k of ['maxSocketsPerAddress', 'maxSockets', 'httpIdleMs', 'maxFramesPerMessage'] as const) {
    if (!(Number.isInteger(o[k]) && o[k] > 0)) problems.push(`${k} is not a positive integer`)
  }
  if (!(o.authTimeoutMs > 0)) problems.push('authTimeoutMs <= 0')
  if (!(o.maxRefusalsPerSecond > 0 && o.refusalBurst >= 1)) problems.push('maxRefusalsPerSecond <= 0 or refusalBurst < 1')
  if (problems.length > 0) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `inconsistent link options: ${problems.join('; ')}`, { problems })
  }
  return o
}
