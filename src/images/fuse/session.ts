/**
 * The session loop: takes requests off the channel, negotiates INIT, dispatches every other
 * opcode to the file system's handlers, and writes exactly one reply per request that wants one.
 *
 * Requests are served concurrently: a handler returning a promise does not hold up the requests
 * behind it. An INTERRUPT of a request whose reader is being killed answers it with EINTR at once
 * and aborts its signal, so a killed reader is never left waiting on a slow fetch; any other
 * signal (a shell's SIGCHLD) leaves the request to be answered as usual, watched until then in
 * case a kill follows (requester.ts). Opcodes without a handler get
 * ENOSYS, which also tells the kernel not to send some of them again.
 */
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import type { Channel } from './channel.js'
import { Errno, FUSE_MAJOR, FUSE_MIN_KERNEL_MINOR, FUSE_MINOR, InitFlag, Op, opName, Size } from './protocol.js'
import { requesterDying } from './requester.js'
import { initOut, outHeader, parseBatchForget, parseForgetIn, parseInHeader, parseInitIn, parseInterruptIn, type InHeader } from './structs.js'

/** One request as a handler sees it. */
export interface FuseRequest {
  header: InHeader
  /** The arguments after the header. */
  body: Buffer
  /** Aborted when the kernel interrupts the request or the connection ends. */
  signal: AbortSignal
}

/** A handler's answer: an errno (`Errno.ENOENT`; 0 = success without a body) or the body's parts. */
export type Reply = number | readonly Uint8Array[]

export type Handler = (req: FuseRequest) => Reply | Promise<Reply>

/** What a file system gives the session. */
export interface FileSystemOps {
  /** One handler per opcode served; others answer ENOSYS. */
  readonly handlers: ReadonlyMap<number, Handler>
  /** The kernel dropped `nlookup` references to `nodeid` (FORGET, BATCH_FORGET; no reply). */
  forget (nodeid: number, nlookup: number): void
}

/** The init parameters we offer (see FuseDefaults for what each means). */
export interface InitParams {
  maxWrite: number
  maxPages: number
  maxReadahead: number
  maxBackground: number
  congestionThreshold: number
}

export interface SessionOptions {
  init: InitParams
  /** How long an INTERRUPT for a request not seen yet is remembered. */
  interruptMemoryMs: number
  /** How often a request interrupted by a signal that does not kill is checked for a kill since. */
  interruptPollMs: number
  /** Whether the request's thread is being killed (default: its /proc status, requester.ts). */
  dying?: (tid: number) => boolean
  /** Protocol trouble and handler failures, for the node's log. */
  onError: (err: WarrenError) => void
}

/** What INIT settled. */
export interface SessionInfo {
  /** The minor the kernel offered. */
  kernelMinor: number
  /** The minor both sides speak. */
  minor: number
  /** Init flags in force. */
  flags: number
  maxReadahead: number
  maxPages: number
}

/** Counters of one session. */
export interface SessionStats {
  requests: number
  /** Requests whose handler is still running. */
  inFlight: number
  /** The most requests that were running at once. */
  maxInFlight: number
  /** Requests answered EINTR because their reader was being killed. */
  interrupted: number
  /** INTERRUPTs for a signal that does not kill: the request was answered as usual. */
  interruptsDeferred: number
  /** Replies the kernel refused or no longer wanted. */
  replyErrors: number
}

/** The flags we ask for; the kernel grants those it offered. */
const WANTED_FLAGS =
  InitFlag.ASYNC_READ | // several READs of one file at once (readahead in parallel)
  InitFlag.PARALLEL_DIROPS | // lookups in the one directory need not be serialized
  InitFlag.MAX_PAGES | // READs larger than 128 KiB
  InitFlag.ABORT_ERROR // a read after an abort says ECONNABORTED rather than ENODEV
// Deliberately not: WRITEBACK_CACHE (read-only), AUTO_INVAL_DATA (contents never change, so
// attribute refreshes must not drop cached pages), DO_READDIRPLUS (a flat directory of a few
// entries gains nothing and every entry would carry a lookup reference).

/** A request whose handler is running. */
interface InFlight {
  opcode: number
  /** The thread that sent it. */
  tid: number
  controller: AbortController
  /** Set once an INTERRUPT came for a reader that was not being killed. */
  watch?: NodeJS.Timeout
}

export class FuseSession {
  /** Resolves when INIT is done; rejects if it fails or the connection ends first. */
  readonly ready: Promise<SessionInfo>
  /** Resolves with the reason (ENODEV: unmounted) when the connection is over. */
  readonly closed: Promise<string>
  private resolveReady!: (info: SessionInfo) => void
  private rejectReady!: (err: WarrenError) => void
  private resolveClosed!: (code: string) => void
  private info: SessionInfo | undefined
  private isClosed = false
  /** Requests whose handler is running: id → its opcode, reader, the signal to abort, and the watch of an interrupted one. */
  private readonly inFlight = new Map<bigint, InFlight>()
  /** INTERRUPTs whose request was not dispatched yet (two readers can deliver out of order). */
  private readonly earlyInterrupts = new Map<bigint, number>()
  private readonly counters: SessionStats = { requests: 0, inFlight: 0, maxInFlight: 0, interrupted: 0, interruptsDeferred: 0, replyErrors: 0 }
  private readonly dying: (tid: number) => boolean

  constructor (private readonly channel: Channel, private readonly ops: FileSystemOps, private readonly options: SessionOptions) {
    this.ready = new Promise((resolve, reject) => { this.resolveReady = resolve; this.rejectReady = reject })
    this.ready.catch(() => undefined) // observed by the mount; never an unhandled rejection
    this.closed = new Promise((resolve) => { this.resolveClosed = resolve })
    this.dying = options.dying ?? ((tid) => requesterDying(tid))
  }

  /** Starts reading requests with `readers` threads, each with a buffer of `bufferBytes`. */
  start (readers: number, bufferBytes: number): void {
    this.channel.start(readers, bufferBytes, {
      request: (buf) => this.onRequest(buf),
      skipped: (code) => this.options.onError(createError(ErrorCodes.INTERNAL, `the kernel dropped a FUSE request (${code})`, { errno: code })),
      end: (code) => this.onEnd(code)
    })
  }

  /** True once the connection is over. */
  get ended (): boolean { return this.isClosed }

  stats (): SessionStats {
    return { ...this.counters, inFlight: this.inFlight.size }
  }

  private onRequest (buf: Buffer): void {
    const h = parseInHeader(buf)
    if (h === undefined) {
      // Without a readable header there is no request id to answer; the kernel would wait forever
      // only for a request it sent malformed, which it does not do.
      this.options.onError(createError(ErrorCodes.INTERNAL, `malformed FUSE request of ${buf.length} bytes`))
      return
    }
    this.counters.requests++
    const body = buf.subarray(Size.IN_HEADER, h.len)
    switch (h.opcode) {
      case Op.INIT: return this.init(h, body)
      case Op.FORGET: {
        const f = parseForgetIn(body)
        if (f !== undefined) this.ops.forget(h.nodeid, f.nlookup)
        return // FORGET has no reply
      }
      case Op.BATCH_FORGET:
        for (const f of parseBatchForget(body)) this.ops.forget(f.nodeid, f.nlookup)
        return
      case Op.INTERRUPT: return this.interrupt(body)
      case Op.DESTROY:
        // Sent last on unmount (fuseblk and virtiofs only); the connection ends right after.
        this.send(h, 0)
        return
    }
    if (this.info === undefined) return this.send(h, Errno.EIO) // the kernel sends nothing else before INIT
    const handler = this.ops.handlers.get(h.opcode)
    if (handler === undefined) return this.send(h, Errno.ENOSYS)
    const interruptedEarly = this.earlyInterrupts.delete(h.unique)
    if (interruptedEarly && this.dying(h.pid)) {
      this.counters.interrupted++
      return this.send(h, Errno.EINTR)
    }
    const controller = new AbortController()
    let result: Reply | Promise<Reply>
    try {
      result = handler({ header: h, body, signal: controller.signal })
    } catch (err) {
      this.options.onError(createError(ErrorCodes.INTERNAL, `FUSE ${opName(h.opcode)} handler threw: ${(err as Error).message}`))
      return this.send(h, Errno.EIO)
    }
    if (!(result instanceof Promise)) {
      if (interruptedEarly) this.counters.interruptsDeferred++
      return this.send(h, result)
    }
    const running: InFlight = { opcode: h.opcode, tid: h.pid, controller }
    this.inFlight.set(h.unique, running)
    this.counters.maxInFlight = Math.max(this.counters.maxInFlight, this.inFlight.size)
    if (interruptedEarly) this.deferInterrupt(h.unique, running)
    const done = (): boolean => {
      clearInterval(running.watch)
      return this.inFlight.delete(h.unique)
    }
    result.then(
      (reply) => { if (done()) this.send(h, reply) },
      (err: unknown) => {
        if (!done()) return
        this.options.onError(createError(ErrorCodes.INTERNAL, `FUSE ${opName(h.opcode)} handler failed: ${(err as Error)?.message ?? String(err)}`))
        this.send(h, Errno.EIO)
      }
    )
  }

  /**
   * An interrupted request still running: answered EINTR, its work aborted, when its reader is
   * being killed; else left to finish, and watched for a kill until it does.
   */
  private interrupt (body: Buffer): void {
    const arg = parseInterruptIn(body)
    if (arg === undefined) return
    const running = this.inFlight.get(arg.unique)
    if (running !== undefined) {
      if (this.dying(running.tid)) this.endInterrupted(arg.unique, running)
      else this.deferInterrupt(arg.unique, running)
      return
    }
    // Either answered already (nothing to do; the kernel ignores the interrupt) or read by another
    // reader thread and not dispatched yet: remember it for a while. No reply to the INTERRUPT
    // itself, which would only matter for requests the kernel re-queues.
    const now = Date.now()
    for (const [unique, at] of this.earlyInterrupts) {
      if (now - at < this.options.interruptMemoryMs && this.earlyInterrupts.size < 1024) break
      this.earlyInterrupts.delete(unique)
    }
    this.earlyInterrupts.set(arg.unique, now)
  }

  /** Leaves an interrupted request to finish, checking every `interruptPollMs` whether its reader is being killed since. */
  private deferInterrupt (unique: bigint, running: InFlight): void {
    this.counters.interruptsDeferred++
    if (running.watch !== undefined) return
    running.watch = setInterval(() => {
      if (this.inFlight.get(unique) === running && this.dying(running.tid)) this.endInterrupted(unique, running)
    }, this.options.interruptPollMs)
    running.watch.unref()
  }

  /** Answers an interrupted request EINTR and aborts its work. */
  private endInterrupted (unique: bigint, running: InFlight): void {
    clearInterval(running.watch)
    this.inFlight.delete(unique)
    this.counters.interrupted++
    this.sendRaw(unique, running.opcode, Errno.EINTR)
    running.controller.abort() // the standard AbortError: the reader gave up, nothing failed
  }

  private init (h: InHeader, body: Buffer): void {
    const arg = parseInitIn(body)
    if (arg === undefined) return this.failInit(h, createError(ErrorCodes.INTERNAL, 'malformed FUSE INIT request'))
    if (arg.major > FUSE_MAJOR) {
      // The kernel then sends INIT again with our major.
      this.send(h, [initOut({ major: FUSE_MAJOR, minor: FUSE_MINOR, maxReadahead: 0, flags: 0, maxBackground: 0, congestionThreshold: 0, maxWrite: 0, timeGran: 0, maxPages: 0 })])
      return
    }
    if (arg.major < FUSE_MAJOR || arg.minor < FUSE_MIN_KERNEL_MINOR) {
      return this.failInit(h, createError(ErrorCodes.UNSUPPORTED, `the kernel speaks FUSE ${arg.major}.${arg.minor}; at least ${FUSE_MAJOR}.${FUSE_MIN_KERNEL_MINOR} is needed`, { kernelMajor: arg.major, kernelMinor: arg.minor }))
    }
    const p = this.options.init
    const info: SessionInfo = {
      kernelMinor: arg.minor,
      minor: Math.min(arg.minor, FUSE_MINOR),
      flags: WANTED_FLAGS & arg.flags,
      maxReadahead: Math.min(p.maxReadahead, arg.maxReadahead),
      maxPages: p.maxPages
    }
    const reply = initOut({
      major: FUSE_MAJOR,
      minor: info.minor,
      maxReadahead: info.maxReadahead,
      flags: info.flags,
      maxBackground: p.maxBackground,
      congestionThreshold: p.congestionThreshold,
      maxWrite: p.maxWrite,
      timeGran: 1,
      maxPages: p.maxPages
    })
    this.info = info
    if (this.sendRaw(h.unique, h.opcode, [reply])) this.resolveReady(info)
    else this.rejectReady(createError(ErrorCodes.INTERNAL, 'the kernel refused the FUSE INIT reply'))
  }

  private failInit (h: InHeader, err: WarrenError): void {
    this.send(h, Errno.EPROTO)
    this.rejectReady(err)
  }

  /** Writes the reply to `h` (failures are counted and reported by `sendRaw`). */
  private send (h: InHeader, reply: Reply): void {
    this.sendRaw(h.unique, h.opcode, reply)
  }

  /** Writes one reply; false when the kernel did not take it. */
  private sendRaw (unique: bigint, opcode: number, reply: Reply): boolean {
    if (this.isClosed) return false
    let parts: Uint8Array[]
    if (typeof reply === 'number') {
      parts = [outHeader(0, -reply, unique)]
    } else {
      let bytes = 0
      for (const p of reply) bytes += p.byteLength
      parts = [outHeader(bytes, 0, unique), ...reply]
    }
    const code = this.channel.write(parts)
    if (code === undefined) return true
    this.counters.replyErrors++
    // ENOENT: the request is gone (interrupted, or the reader died); ENODEV/ECONNABORTED: the
    // connection is ending. Anything else means the reply itself was wrong.
    if (code !== 'ENOENT' && code !== 'ENODEV' && code !== 'ECONNABORTED') {
      this.options.onError(createError(ErrorCodes.INTERNAL, `the kernel refused the FUSE ${opName(opcode)} reply (${code})`, { errno: code, op: opName(opcode) }))
    }
    return false
  }

  private onEnd (code: string): void {
    if (this.isClosed) return
    this.isClosed = true
    for (const { controller, watch } of this.inFlight.values()) {
      clearInterval(watch)
      controller.abort(createError(ErrorCodes.CONNECTION_CLOSED, 'the FUSE connection ended'))
    }
    this.inFlight.clear()
    this.rejectReady(createError(ErrorCodes.CONNECTION_CLOSED, `the FUSE connection ended before INIT (${code})`))
    this.resolveClosed(code)
  }
}
