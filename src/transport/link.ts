/**
 * A link is one logical session between two processes. It outlives its sockets: when a socket
 * drops, the link is `detached`, keeps queueing (bounded) and resumes on the next socket of the
 * same session. Client and server links are this same class; `client.ts` and `server.ts` only
 * add the handshake and what to do on a detach (reconnect, or wait for the client).
 *
 * Delivery: tells and requests are at-most-once. Frames queued while detached go out after the
 * resume; a frame lost inside a dying socket is lost (a request then ends in ASK_TIMEOUT), and is
 * never replayed, so never executed twice. Streams are exactly-once: sequence numbers, a replay
 * buffer and the resume exchange (see stream-writer.ts).
 */
import { EventEmitter } from 'node:events'
import type { WebSocket } from 'ws'
import { createError, ErrorCodes, fromWireError, toWireError, type ErrorCode, type WarrenError, type WireError } from '../errors.js'
import type { Codec } from './codec.js'
import type { LinkOptions } from './defaults.js'
import { FrameProblem, MAX_TIMEOUT_MS, parseFrame, type Frame, type StreamPosition } from './frames.js'
import { createHeartbeat, type Heartbeat } from './heartbeat.js'
import { createOutbox, type Outbox } from './outbox.js'
import { createPendingRequests, type PendingRequests } from './requests.js'
import { dispatchFrame } from './dispatch.js'
import { createTokenBucket, type TokenBucket } from './token-bucket.js'
import type { StreamPort } from './stream-port.js'
import { createStreamReader, type StreamReader, type StreamReaderControl } from './stream-reader.js'
import { createStreamWriter, type StreamWriter, type StreamWriterControl } from './stream-writer.js'

/** What a link does with what the peer sends. Each part is optional; missing parts refuse politely. */
export interface LinkHandler {
  /** A tell for actor `to`. Exceptions are caught and counted as dead letters. */
  tell? (to: string, message: unknown, from: string | undefined, link: Link): void
  /**
   * A request for actor `to`; the (awaited) return value is the reply, a throw the error.
   * `timeoutMs` is how long the asker waits (when it said), so the work can give up in time too.
   */
  request? (to: string, message: unknown, from: string | undefined, link: Link, timeoutMs: number | undefined): unknown
  /** A stream the peer opened towards actor `to` (`reader.to`). */
  stream? (reader: StreamReader, link: Link): void
}

/** `connecting`: before the first socket; `open`: socket attached; `detached`: waiting for a resume; `closed`: for good. */
export type LinkState = 'connecting' | 'open' | 'detached' | 'closed'

export interface LinkEvents {
  /** A socket was attached after a successful handshake; `resumed` is false for a new session. */
  open: [info: { resumed: boolean, sessionId: string }]
  /** The socket dropped; the session may still be resumed. */
  detach: [reason: WarrenError]
  /** Client: a reconnect attempt is scheduled. */
  reconnect: [info: { attempt: number, delayMs: number }]
  /** The link ended for good; pending requests were rejected with WARREN_ERR_CONNECTION_CLOSED. */
  close: [reason: WarrenError | undefined]
  /** Buffered bytes fell to the low-water mark after a send returned false. */
  drain: []
  /** The peer refused a frame this side sent (an error frame without a request id). */
  'peer-error': [error: WarrenError]
  /** This side refused a frame the peer sent (and told the peer). */
  'protocol-error': [error: WarrenError]
}

export interface Link extends EventEmitter<LinkEvents> {
  /** The session id, issued by the server; empty until the first handshake. */
  readonly sessionId: string
  /** Server side: what `authenticate` returned for this session's token. */
  readonly principal: unknown
  readonly state: LinkState
  /** The current WebSocket, for diagnostics and tests; never send on it directly. */
  readonly socket: WebSocket | null
  /** Outgoing bytes held (socket buffers and queued batches). */
  readonly bufferedAmount: number
  /** False while above the high-water mark. */
  readonly writable: boolean
  /** Requests waiting for their reply. */
  readonly inflightRequests: number
  /**
   * Sends a fire-and-forget message to actor `to` on the other side.
   * @returns false when the link is above its high-water mark: the message was queued, wait for 'drain'
   * @throws WARREN_ERR_CONNECTION_CLOSED, WARREN_ERR_FRAME_TOO_LARGE, WARREN_ERR_OVERLOADED (hard cap), WARREN_ERR_INVALID_ARGUMENT (unencodable)
   */
  tell (to: string, message: unknown, from?: string): boolean
  /**
   * Sends a request to actor `to` and waits for its reply.
   * @param options `timeoutMs` (default `askTimeoutMs`), `from` (a reply address for the receiver)
   * @returns the reply; rejects with the remote error (same code), WARREN_ERR_ASK_TIMEOUT, WARREN_ERR_CONNECTION_CLOSED or WARREN_ERR_OVERLOADED
   */
  request<R = unknown> (to: string, message: unknown, options?: { timeoutMs?: number, from?: string }): Promise<R>
  /**
   * Opens a stream towards actor `to` on the other side.
   * @param meta plain data delivered with the open (e.g. which command's output this is)
   * @throws WARREN_ERR_CONNECTION_CLOSED, WARREN_ERR_OVERLOADED (too many open streams)
   */
  openStream (to: string, meta?: unknown): StreamWriter
  /** Replaces the handler for incoming tells, requests and streams. */
  setHandler (handler: LinkHandler | undefined): void
  /**
   * Stops reading the peer's frames for `ms` (backpressure on a peer past its rate); what was
   * read already is answered with `refusal` unhandled. A hold already on is not extended.
   */
  holdReading (ms: number, refusal: WarrenError): void
  /** Ends the session for good: flushes, says bye (the peer will not try to resume), closes the socket. */
  close (reason?: unknown): void
}

/** What the client or server glue learns from a link. */
export interface LinkHooks {
  detached (reason: WarrenError): void
  closed (reason: WarrenError | undefined): void
}

export class LinkCore extends EventEmitter<LinkEvents> implements Link {
  sessionId: string
  principal: unknown
  state: LinkState = 'connecting'
  socket: WebSocket | null = null
  handler: LinkHandler | undefined
  readonly outbox: Outbox
  readonly requests: PendingRequests
  readonly writers = new Map<number, StreamWriterControl>()
  readonly readers = new Map<number, StreamReaderControl>()
  readonly port: StreamPort
  incoming = 0
  awaitingResume = false
  private streamsLive = false
  private nextSid = 0
  private readonly heartbeat: Heartbeat
  private detachReason: WarrenError | undefined
  /** The peer's refused frames: past the budget the link is closed. */
  private readonly refusals: TokenBucket
  /** Set while reading is held (`holdReading`), with the refusal that held it. */
  private holdTimer: NodeJS.Timeout | undefined
  private heldRefusal: WireError | undefined

  constructor (
    readonly options: LinkOptions,
    readonly codec: Codec,
    private readonly hooks: LinkHooks,
    init: { sessionId: string, principal: unknown, handler: LinkHandler | undefined }
  ) {
    super()
    this.sessionId = init.sessionId
    this.principal = init.principal
    this.handler = init.handler
    this.outbox = createOutbox({ ...options, codec, onDrain: () => this.onDrain() })
    this.refusals = createTokenBucket(options.maxRefusalsPerSecond, options.refusalBurst)
    this.requests = createPendingRequests(options.maxInflightRequests)
    this.heartbeat = createHeartbeat({
      intervalMs: options.heartbeatIntervalMs,
      timeoutMs: options.heartbeatTimeoutMs,
      ping: () => { this.pushQuietly({ k: 'ping' }) },
      dead: (silentMs) => {
        this.detachReason = createError(ErrorCodes.PEER_UNRESPONSIVE, `peer silent for ${silentMs} ms`, { silentMs })
        // terminate, not close: a dead peer never completes a close handshake.
        this.socket?.terminate()
      }
    })
    const link = this
    this.port = {
      get live () { return link.state === 'open' && link.streamsLive },
      get writable () { return link.outbox.writable },
      push: (frame) => this.outbox.push(frame),
      release: (side, sid) => { (side === 'writer' ? this.writers : this.readers).delete(sid) }
    }
  }

  get bufferedAmount (): number { return this.outbox.bufferedAmount }
  get writable (): boolean { return this.outbox.writable }
  get inflightRequests (): number { return this.requests.size }

  tell (to: string, message: unknown, from?: string): boolean {
    if (this.state === 'closed') throw this.closedError()
    return this.outbox.push(from === undefined ? { k: 'tell', to, m: message } : { k: 'tell', to, m: message, from })
  }

  request<R = unknown> (to: string, message: unknown, options: { timeoutMs?: number, from?: string } = {}): Promise<R> {
    if (this.state === 'closed') return Promise.reject(this.closedError())
    // The timeout travels with the request, so the receiver can stop working on it when the asker stops waiting.
    const t = Math.min(Math.max(options.timeoutMs ?? this.options.askTimeoutMs, 0) || 0, MAX_TIMEOUT_MS)
    let entry: { id: number, promise: Promise<R> }
    try {
      entry = this.requests.add<R>(t, to)
    } catch (err) {
      return Promise.reject(err)
    }
    const { id, promise } = entry
    try {
      this.outbox.push(options.from === undefined ? { k: 'request', id, to, m: message, t } : { k: 'request', id, to, m: message, from: options.from, t })
    } catch (err) {
      this.requests.reject(id, err)
    }
    return promise
  }

  openStream (to: string, meta?: unknown): StreamWriter {
    if (this.state === 'closed') throw this.closedError()
    if (this.writers.size >= this.options.maxStreams) {
      throw createError(ErrorCodes.OVERLOADED, `${this.options.maxStreams} streams already open on this link`, { limit: this.options.maxStreams })
    }
    const sid = ++this.nextSid
    const w = createStreamWriter(sid, to, meta, this.port, { chunkBytes: this.options.streamChunkBytes, overrunBytes: this.options.streamOverrunBytes })
    this.writers.set(sid, w)
    return w
  }

  setHandler (handler: LinkHandler | undefined): void {
    this.handler = handler
  }

  close (reason?: unknown): void {
    this.shutdown(reason === undefined ? undefined : fromWireError(toWireError(reason)), true)
  }

  /** Attaches a socket whose handshake is done. `awaitResume`: stream frames wait for `resumeStreams`. */
  attach (ws: WebSocket, resumed: boolean, awaitResume: boolean): void {
    if (this.socket !== null) {
      // A resumed session on a new socket while the old one still looks alive: the old one is stale.
      const old = this.socket
      this.dropSocket()
      old.terminate()
    }
    this.socket = ws
    this.state = 'open'
    this.detachReason = undefined
    this.streamsLive = !awaitResume
    this.awaitingResume = awaitResume
    ws.on('message', this.onSocketMessage)
    ws.on('close', this.onSocketCloseEvent)
    this.outbox.attach(ws)
    this.heartbeat.start()
    this.emit('open', { resumed, sessionId: this.sessionId })
  }

  /** This side's consumer positions, for the peer's producers. */
  positions (): StreamPosition[] {
    return [...this.readers.values()].map((r) => r.position())
  }

  /** The peer's consumer positions arrived: producers re-send what it lacks, then carry on. */
  resumeStreams (positions: StreamPosition[]): void {
    this.awaitingResume = false
    this.streamsLive = true
    const bySid = new Map(positions.map((p) => [p[0], p]))
    for (const w of [...this.writers.values()]) w.onResume(bySid.get(w.id))
    for (const p of positions) {
      // The peer is waiting on a stream this side no longer has: end it rather than leave it hanging.
      if (!this.writers.has(p[0])) {
        const err = toWireError(createError(ErrorCodes.STREAM_RESUME_GAP, `stream ${p[0]} is gone on the producer's side`))
        this.pushQuietly({ k: 'end', sid: p[0], seq: p[1] + 1, err })
      }
    }
  }

  /** The old session is gone (the server did not know it): everything in flight on it fails. */
  resetSession (sessionId: string): void {
    const err = createError(ErrorCodes.CONNECTION_CLOSED, 'the session was lost while reconnecting')
    this.outbox.clear()
    this.requests.rejectAll(err)
    for (const w of [...this.writers.values()]) w.fail(err)
    for (const r of [...this.readers.values()]) r.fail(err)
    this.sessionId = sessionId
  }

  /** Refuses a frame: tells the peer with an error frame and reports it locally. */
  refuse (code: ErrorCode, message: string, id?: number, details?: Record<string, unknown>): void {
    if (this.state === 'closed') return
    const err = createError(code, message, details)
    const wire = toWireError(err)
    this.pushQuietly(id === undefined ? { k: 'error', err: wire } : { k: 'error', id, err: wire })
    this.emit('protocol-error', err)
    if (this.refusals.take(1) > 0) {
      this.shutdown(createError(ErrorCodes.PROTOCOL_VIOLATION, `the peer sent more than ${this.options.maxRefusalsPerSecond} refused frames a second (bursts of ${this.options.refusalBurst}); the last: ${message}`,
        { limit: this.options.maxRefusalsPerSecond }), true)
    }
  }

  /**
   * Stops reading the peer's frames for `ms` (what it sends waits in the socket, and then in its
   * own buffers): the gateway's answer to a tenant past its request rate, so that what it goes
   * on sending costs nothing until then. Frames read before the socket stopped are not handled
   * either: requests are answered with `refusal`, stream opens cancelled with it, tells dropped.
   * A hold already on is not extended.
   */
  holdReading (ms: number, refusal: WarrenError): void {
    const ws = this.socket
    if (ws === null || this.holdTimer !== undefined || this.state !== 'open') return
    ws.pause()
    this.heldRefusal = toWireError(refusal)
    this.holdTimer = setTimeout(() => {
      this.holdTimer = undefined
      this.heldRefusal = undefined
      if (this.socket === ws) ws.resume()
    }, ms)
    this.holdTimer.unref?.()
  }

  /** Queues a frame where failure is acceptable (pings, error answers, credit). */
  pushQuietly (frame: Frame): void {
    try { this.outbox.push(frame) } catch { /* over the hard cap or unencodable: dropping it is the bounded choice */ }
  }

  /** Ends the session for good, with or without telling the peer. */
  shutdown (reason: WarrenError | undefined, sayBye: boolean): void {
    if (this.state === 'closed') return
    this.state = 'closed'
    this.heartbeat.stop()
    const ws = this.socket
    if (ws !== null) {
      if (sayBye) {
        this.pushQuietly(reason === undefined ? { k: 'bye' } : { k: 'bye', err: toWireError(reason) })
        this.outbox.flushNow()
      }
      this.dropSocket()
      ws.close(1000, 'session closed')
    }
    this.outbox.clear()
    const err = reason ?? this.closedError()
    this.requests.rejectAll(err.code === ErrorCodes.CONNECTION_CLOSED ? err : this.closedError(err.message))
    for (const w of [...this.writers.values()]) w.fail(err)
    for (const r of [...this.readers.values()]) r.fail(err)
    this.hooks.closed(reason)
    this.emit('close', reason)
  }

  private closedError (message = 'the link is closed'): WarrenError {
    return createError(ErrorCodes.CONNECTION_CLOSED, message)
  }

  // Bound once, removed by identity: ws (and its server's client tracking) keep listeners of their own.
  private readonly onSocketMessage = (data: Buffer, isBinary: boolean): void => { this.onMessage(data, isBinary) }
  private readonly onSocketCloseEvent = (code: number): void => { this.onSocketClose(code) }

  private dropSocket (): void {
    this.socket?.off('message', this.onSocketMessage)
    this.socket?.off('close', this.onSocketCloseEvent)
    this.socket = null
    this.outbox.detach()
    this.heartbeat.stop()
    this.streamsLive = false
  }

  private onSocketClose (code: number): void {
    this.dropSocket()
    if (this.state === 'closed') return
    this.state = 'detached'
    const reason = this.detachReason ?? createError(ErrorCodes.CONNECTION_CLOSED, `socket closed (code ${code})`, { code })
    this.detachReason = undefined
    this.emit('detach', reason)
    this.hooks.detached(reason)
  }

  private onMessage (data: Buffer, isBinary: boolean): void {
    this.heartbeat.seen()
    if (!isBinary) {
      this.refuse(ErrorCodes.MALFORMED_FRAME, 'text messages are not part of the protocol')
      this.outbox.flushNow()
      this.socket?.close(1003, 'binary frames only')
      return
    }
    let values: unknown[]
    let sizes: number[]
    try {
      ({ values, sizes } = this.codec.decode(data))
    } catch (err) {
      // Undecodable bytes: nothing else in this message can be trusted, and whatever sent it is confused.
      const e = err as WarrenError
      this.refuse(e.code, e.message, undefined, e.details)
      this.outbox.flushNow()
      this.socket?.close(1007, 'undecodable message')
      return
    }
    if (values.length > this.options.maxFramesPerMessage) {
      this.refuse(ErrorCodes.PROTOCOL_VIOLATION, `a message of ${values.length} frames; at most ${this.options.maxFramesPerMessage} may be sent in one`, undefined, { limit: this.options.maxFramesPerMessage })
      this.outbox.flushNow()
      this.socket?.close(1008, 'too many frames in one message')
      return
    }
    const ws = this.socket
    for (let i = 0; i < values.length; i++) {
      if (this.socket !== ws || this.state === 'closed') return
      const f = parseFrame(values[i])
      if (f instanceof FrameProblem) {
        this.refuse(f.code, f.message, f.id, f.kind === undefined ? undefined : { kind: f.kind })
        continue
      }
      if (sizes[i]! > this.options.maxFrameBytes) {
        this.refuse(ErrorCodes.FRAME_TOO_LARGE, `${f.k} frame of ${sizes[i]} bytes exceeds the limit of ${this.options.maxFrameBytes}`,
          f.k === 'request' ? f.id : undefined, { kind: f.k, size: sizes[i], limit: this.options.maxFrameBytes })
        continue
      }
      if (this.heldRefusal !== undefined && (f.k === 'request' || f.k === 'tell' || f.k === 'open')) {
        if (f.k === 'request') this.pushQuietly({ k: 'error', id: f.id, err: this.heldRefusal })
        else if (f.k === 'open') this.pushQuietly({ k: 'cancel', sid: f.sid, err: this.heldRefusal })
        continue
      }
      dispatchFrame(this, f)
    }
  }

  private onDrain (): void {
    for (const w of [...this.writers.values()]) w.pump()
    this.emit('drain')
  }

  /** Creates the reader for an incoming open (after the checks in dispatch). */
  acceptStream (sid: number, to: string, meta: unknown): StreamReaderControl {
    const r = createStreamReader(sid, to, meta, this.port, { windowBytes: this.options.streamWindowBytes, ackFraction: this.options.streamAckFraction })
    this.readers.set(sid, r)
    return r
  }
}

export type { StreamReader, StreamWriter }
