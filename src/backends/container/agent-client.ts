/**
 * The client of the in-sandbox agent: one connection (a Unix socket for containers; any duplex
 * stream will do for VMs), many requests in flight on it, each exec's output streamed to its
 * handlers with its sequence numbers checked.
 */
import { createConnection } from 'node:net'
import { constants as osConstants } from 'node:os'
import type { Duplex } from 'node:stream'
import { createError, ErrorCodes, fromWireError, isWarrenError, type WarrenError } from '../../errors.js'
import type {
  AgentExecHandlers, AgentExecOptions, AgentExecResult, AgentExecution, AgentFiles
} from './agent-types.js'
import { wellFormed } from '../../text.js'
import { createAgentFiles } from './agent-files.js'
import { ContainerDefaults } from './defaults.js'
import { AgentLimits, encodeFrame, FrameReader, isCount, type AgentMessage, type AgentRequest, type AgentRetainedExec } from './protocol.js'

/** Options of `connectAgent` / `createAgentClient`. */
export interface AgentClientOptions {
  /** Give up connecting after this long (default `ContainerDefaults.connectTimeoutMs`). */
  connectTimeoutMs?: number
  /** Requests other than exec fail with WARREN_ERR_TIMEOUT after this long (default `ContainerDefaults.requestTimeoutMs`). */
  requestTimeoutMs?: number
}

/** A connection to one agent. */
export interface AgentClient {
  /** Checks the agent answers (within `timeoutMs`, default the client's request timeout); its protocol version and its PID (1 inside a sandbox). */
  ping (timeoutMs?: number): Promise<{ version: number, pid: number }>
  /**
   * How long the oldest request or command start the agent has not answered has waited (ms; 0
   * when none waits). A command running is not waiting: it answered when it started.
   */
  oldestWaitMs (now?: number): number
  /** Ends the connection at once with `reason` (a watchdog that gave up on the agent): what waits rejects with it. */
  abandon (reason: WarrenError): void
  /** Renames the sandbox (its UTS hostname): a pooled sandbox takes the id it is handed out as. */
  setHostname (name: string): Promise<void>
  /**
   * Gives a VM what must be its own after a restore (or a pause): a name, randomness mixed into
   * its kernel's pool (which is then reseeded), the time. Seed and time: VMs only (UNSUPPORTED elsewhere).
   */
  setIdentity (identity: { name?: string, seed?: Uint8Array, timeMs?: number }): Promise<void>
  /**
   * Streams a VM's writable layer (or, with `flatten`, its whole tree) as a pax tar through
   * `onStdout`, within the credit of `windowBytes`; ends like an exec (exit code 0 when whole).
   */
  startTree (opts: { flatten?: boolean, windowBytes?: number }, handlers: AgentExecHandlers): AgentExecution
  /**
   * Runs a command to its end. Resolves with how it ended (a non-zero exit is a result);
   * rejects when it could not start (e.g. WARREN_ERR_NOT_FOUND for a missing program), when a
   * handler threw (with what it threw), or when the connection broke.
   */
  exec (argv: readonly string[], opts?: AgentExecOptions, handlers?: AgentExecHandlers): Promise<AgentExecResult>
  /** Starts a command and hands back its id and a way to kill it; `result` is what `exec` resolves to. */
  startExec (argv: readonly string[], opts?: AgentExecOptions, handlers?: AgentExecHandlers): AgentExecution
  /**
   * The agent's resumable execs (started with `retain`), running or ended and not yet released.
   * Ids this client picks from now on are above theirs.
   */
  listExecs (): Promise<AgentRetainedExec[]>
  /**
   * Binds a resumable exec to this connection: its kept output from `fromSeq` on (at least what the
   * last host acknowledged), then the rest, as `startExec` delivers it; `windowBytes` is its new credit.
   * The result rejects with WARREN_ERR_NOT_FOUND when it is gone, WARREN_ERR_STREAM_RESUME_GAP
   * when `fromSeq` is older than what the agent kept.
   */
  attachExec (execId: number, opts: { fromSeq: number, windowBytes?: number }, handlers?: AgentExecHandlers): AgentExecution
  /** Signals a running exec's process group (default SIGKILL). WARREN_ERR_NOT_FOUND if it has ended. */
  kill (execId: number, signal?: number | NodeJS.Signals): Promise<void>
  /** File operations inside the sandbox. */
  readonly files: AgentFiles
  /** True once the connection has ended. */
  readonly closed: boolean
  /** Why it ended, once it has (PROTOCOL_VIOLATION or MALFORMED_FRAME: the agent broke the protocol). */
  readonly endReason: WarrenError | undefined
  /** Resolves when the connection ends, for whatever reason. */
  readonly ended: Promise<void>
  /** Ends the connection; commands still running on it are killed by the agent. */
  close (): Promise<void>
}

/**
 * Connects to an agent's Unix socket.
 * @param socketPath the socket the launcher bound (`LaunchedSandbox.socketPath`)
 * @throws WARREN_ERR_SANDBOX_GONE when nothing listens there; WARREN_ERR_TIMEOUT after `connectTimeoutMs`
 */
export async function connectAgent (socketPath: string, options: AgentClientOptions = {}): Promise<AgentClient> {
  const timeoutMs = options.connectTimeoutMs ?? ContainerDefaults.connectTimeoutMs
  const socket = createConnection({ path: socketPath })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy()
      reject(createError(ErrorCodes.TIMEOUT, `connecting to ${socketPath} took over ${timeoutMs} ms`, { socketPath }))
    }, timeoutMs)
    socket.once('connect', () => { clearTimeout(timer); resolve() })
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(createError(ErrorCodes.SANDBOX_GONE, `cannot connect to the agent at ${socketPath}: ${err.message}`, { socketPath, errno: err.code ?? '' }))
    })
  })
  socket.setNoDelay?.(true)
  return createAgentClient(socket, options)
}

interface PendingRequest {
  resolve: (m: Extract<AgentMessage, { t: 'ok' }>) => void
  reject: (err: WarrenError) => void
  timer: NodeJS.Timeout
  /** When it was sent (ms since the epoch). */
  at: number
}

interface ExecState {
  handlers: AgentExecHandlers
  resolve: (r: AgentExecResult) => void
  reject: (err: unknown) => void
  nextSeq: number
  pid: number
  /**
   * Output bytes the agent may still send: its window plus every grant since (or, without a
   * window, its cap). An agent past it broke the protocol: a VM's runs under the tenant's root,
   * and what it sends beyond its credit would be held by the node without a bound.
   */
  allowance: number
  /** Streamed stdin sent and not yet taken by the command's pipe (the stdin window, agents of version 2). */
  stdinUntaken: number
  /** The agent said the command's stdin is gone: nothing more is sent. */
  stdinClosed: boolean
  /** Wakes the stdin pump waiting for the window (or for the end). */
  stdinWake?: () => void
  /** Set when a handler threw or the stream broke its rules: the exec is killed and rejects with it. */
  failure?: unknown
  done: boolean
  /** When it was sent, until the agent said it started (then undefined). */
  awaitingStartSince?: number
}

/** The codes an agent answers with (protocol.h); INTERNAL, the agent's own failure, becomes BACKEND_UNAVAILABLE. */
const AGENT_CODES: ReadonlySet<string> = new Set([
  ErrorCodes.MALFORMED_FRAME, ErrorCodes.FRAME_TOO_LARGE, ErrorCodes.UNKNOWN_FRAME_KIND, ErrorCodes.INVALID_ARGUMENT,
  ErrorCodes.NOT_FOUND, ErrorCodes.FORBIDDEN, ErrorCodes.NO_CAPACITY, ErrorCodes.QUOTA, ErrorCodes.OVERLOADED,
  ErrorCodes.UNSUPPORTED, ErrorCodes.BACKEND_UNAVAILABLE, ErrorCodes.STREAM_RESUME_GAP
])

/** A field an agent may name: a request field's name, such as `cwd` or `limits.diskMiB`. */
const FIELD = /^[A-Za-z][A-Za-z0-9.]{0,63}$/

/** Above this, stdin bytes go as a stream of frames instead of inside the exec request. */
const INLINE_STDIN_BYTES = 1024 * 1024

function signalNumber (signal: number | NodeJS.Signals | undefined): number {
  if (signal === undefined) return osConstants.signals.SIGKILL
  if (typeof signal === 'number') return signal
  const n = osConstants.signals[signal]
  if (n === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown signal ${signal}`)
  return n
}


/**
 * Speaks the protocol over an already connected stream (a socket, a VM's serial port).
 * @param stream the byte stream to the agent; the client owns it from now on
 */
export function createAgentClient (stream: Duplex, options: AgentClientOptions = {}): AgentClient {
  const requestTimeoutMs = options.requestTimeoutMs ?? ContainerDefaults.requestTimeoutMs
  const reader = new FrameReader()
  const pending = new Map<number, PendingRequest>()
  const execs = new Map<number, ExecState>()
  let nextId = 1
  let closed = false
  let endReason: WarrenError | undefined
  let markEnded!: () => void
  const ended = new Promise<void>((resolve) => { markEnded = resolve })

  function end (reason: WarrenError): void {
    if (closed) return
    closed = true
    endReason = reason
    stream.destroy()
    for (const [id, p] of pending) { clearTimeout(p.timer); pending.delete(id); p.reject(reason) }
    for (const [id, e] of execs) { execs.delete(id); e.done = true; e.stdinWake?.(); e.reject(e.failure ?? reason) }
    markEnded()
  }

  stream.on('data', (chunk: Buffer) => {
    let messages: AgentMessage[]
    try {
      messages = reader.push(chunk)
    } catch (err) {
      end(isWarrenError(err) ? err : createError(ErrorCodes.MALFORMED_FRAME, String(err)))
      return
    }
    for (const m of messages) onMessage(m)
  })
  stream.on('error', (err) => end(createError(ErrorCodes.CONNECTION_CLOSED, `agent connection failed: ${err.message}`)))
  stream.on('close', () => end(createError(ErrorCodes.CONNECTION_CLOSED, 'agent connection closed')))

  /**
   * An agent's err as an error; the field it names, if any, goes into `details.field`. A VM's
   * agent is the tenant's: only the codes an agent gives pass, its message is cut, and a field
   * must look like one, so nothing it forges reads as the cluster's own word.
   */
  function agentError (m: Extract<AgentMessage, { t: 'err' }>): WarrenError {
    const message = wellFormed(m.message.slice(0, AgentLimits.maxErrorChars))
    const field = typeof m.field === 'string' && FIELD.test(m.field) ? m.field : undefined
    if (m.code === ErrorCodes.INTERNAL) return createError(ErrorCodes.BACKEND_UNAVAILABLE, `the sandbox's agent failed: ${message}`, { reason: 'agent' })
    if (!AGENT_CODES.has(m.code)) return createError(ErrorCodes.BACKEND_UNAVAILABLE, `the sandbox's agent answered with a code it does not give (${wellFormed(m.code.slice(0, 64))}): ${message}`, { reason: 'agent' })
    return fromWireError({ code: m.code, message, ...(field !== undefined ? { details: { field } } : {}) })
  }

  function onMessage (m: AgentMessage): void {
    if (m.t === 'ok' || (m.t === 'err' && !execs.has(m.id))) {
      const p = pending.get(m.id)
      if (p === undefined) {
        // id 0: the agent could not read one of our frames at all, which only a bug here causes.
        if (m.t === 'err' && m.id === 0) end(agentError(m))
        return // a reply that came after its request timed out
      }
      pending.delete(m.id)
      clearTimeout(p.timer)
      if (m.t === 'ok') p.resolve(m)
      else p.reject(agentError(m))
      return
    }
    const e = execs.get(m.id)
    if (e === undefined || e.done) return
    switch (m.t) {
      case 'err':
        settle(m.id, e, agentError(m))
        return
      case 'taken':
        e.stdinUntaken = Math.max(0, e.stdinUntaken - m.bytes)
        if (m.closed === true) e.stdinClosed = true
        e.stdinWake?.()
        return
      case 'started':
        e.pid = m.pid
        e.awaitingStartSince = undefined
        call(m.id, e, () => e.handlers.onStart?.({ execId: m.id, pid: m.pid }))
        return
      case 'out':
        if (m.seq !== e.nextSeq) {
          fail(m.id, e, createError(ErrorCodes.PROTOCOL_VIOLATION, `exec ${m.id}: output frame ${m.seq} where ${e.nextSeq} was due`))
          return
        }
        e.allowance -= m.data.length
        if (e.allowance < 0) {
          // Not one exec's fault: the agent itself ignores credit, and nothing it sends is held any more.
          end(createError(ErrorCodes.PROTOCOL_VIOLATION, `exec ${m.id}: the agent sent output beyond the credit it was given`))
          return
        }
        e.nextSeq++
        call(m.id, e, () => (m.fd === 1 ? e.handlers.onStdout : e.handlers.onStderr)?.(m.data))
        return
      case 'exit':
        if (m.seq !== e.nextSeq && e.failure === undefined) {
          e.failure = createError(ErrorCodes.PROTOCOL_VIOLATION, `exec ${m.id}: ended after ${m.seq} output frames, ${e.nextSeq} arrived`)
        }
        settle(m.id, e, e.failure, {
          exitCode: m.code ?? 128 + (m.signal ?? 0),
          ...(m.signal !== undefined ? { signal: m.signal } : {}),
          timedOut: m.timedOut === true,
          truncated: m.truncated === true,
          killed: m.killed === true,
          durationMs: m.durationMs,
          pid: e.pid
        })
    }
  }

  /** Runs a handler; one that throws fails the exec (which is then killed). */
  function call (id: number, e: ExecState, fn: () => void): void {
    if (e.failure !== undefined) return
    try { fn() } catch (err) { fail(id, e, err) }
  }

  function fail (id: number, e: ExecState, err: unknown): void {
    if (e.failure !== undefined) return
    e.failure = err
    void killExec(id, osConstants.signals.SIGKILL).catch(() => {})
  }

  function settle (id: number, e: ExecState, failure: unknown, result?: AgentExecResult): void {
    e.done = true
    execs.delete(id)
    e.stdinWake?.()
    if (failure !== undefined) e.reject(failure)
    else if (result !== undefined) e.resolve(result)
  }

  function send (msg: AgentRequest): boolean {
    if (closed) throw endReason ?? createError(ErrorCodes.CONNECTION_CLOSED, 'agent connection closed')
    return stream.write(encodeFrame(msg))
  }

  /** Sends, then waits until the stream has room again (for streamed stdin). */
  async function sendPaced (msg: AgentRequest): Promise<void> {
    if (send(msg)) return
    await new Promise<void>((resolve) => {
      const done = (): void => { stream.off('drain', done); stream.off('close', done); resolve() }
      stream.on('drain', done)
      stream.on('close', done)
    })
  }

  function request<T extends AgentRequest['t']> (msg: Extract<AgentRequest, { t: T }>, timeoutMs = requestTimeoutMs): Promise<Extract<AgentMessage, { t: 'ok' }>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(msg.id)
        reject(createError(ErrorCodes.TIMEOUT, `agent did not answer ${msg.t} within ${timeoutMs} ms`, { kind: msg.t }))
      }, timeoutMs)
      pending.set(msg.id, { resolve, reject, timer, at: Date.now() })
      try {
        send(msg)
      } catch (err) {
        clearTimeout(timer)
        pending.delete(msg.id)
        reject(err)
      }
    })
  }

  async function killExec (execId: number, signal: number): Promise<void> {
    await request({ t: 'kill', id: nextId++, exec: execId, signal })
  }

  /** The agent's protocol version, asked once (a ping) and kept. */
  let version: Promise<number> | undefined
  function agentVersion (): Promise<number> {
    version ??= request({ t: 'ping', id: nextId++ }).then((m) => typeof m.version === 'number' ? m.version : 1, () => 1)
    return version
  }

  /**
   * Streams `source` into the exec's stdin. With an agent of version 2 no more than
   * `AgentLimits.stdinWindowBytes` are sent and not yet taken by the command's pipe, so the
   * source is read only as fast as the command reads (before, the agent held whatever came).
   */
  async function pumpStdin (id: number, e: ExecState, source: AsyncIterable<Uint8Array>): Promise<void> {
    const step = ContainerDefaults.stdinChunkBytes
    const window = await agentVersion() >= 2 ? AgentLimits.stdinWindowBytes : Number.POSITIVE_INFINITY
    const open = (): boolean => !e.done && !e.stdinClosed
    try {
      for await (const chunk of source) {
        for (let at = 0; at < chunk.length && open(); at += step) {
          const piece = chunk.subarray(at, at + step)
          while (open() && e.stdinUntaken + piece.length > window) {
            await new Promise<void>((resolve) => { e.stdinWake = resolve })
            e.stdinWake = undefined
          }
          if (!open()) break
          e.stdinUntaken += piece.length
          await sendPaced({ t: 'stdin', id, data: piece })
        }
        if (!open()) return
      }
      if (open()) send({ t: 'stdin', id, eof: true })
    } catch (err) {
      if (!e.done) fail(id, e, err)
    }
  }

  /**
   * An exec-like request's execution (exec and tree): replies started, out..., exit.
   * @param allowance the output bytes it may send before a grant (`ExecState.allowance`)
   */
  function startExecution (id: number, handlers: AgentExecHandlers, allowance: number, firstSeq = 0): { execution: AgentExecution, e: ExecState, result: Promise<AgentExecResult> } {
    let resolve!: (r: AgentExecResult) => void
    let reject!: (err: unknown) => void
    const result = new Promise<AgentExecResult>((res, rej) => { resolve = res; reject = rej })
    const execution: AgentExecution = {
      execId: id,
      result,
      kill: (signal) => killExec(id, signalNumber(signal)),
      resize: async (size) => { await request({ t: 'resize', id: nextId++, exec: id, cols: size.cols, rows: size.rows }) },
      grant: (bytes) => {
        const e = execs.get(id)
        if (e === undefined || e.done || closed || !(bytes > 0)) return
        e.allowance += Math.floor(bytes)
        send({ t: 'credit', id, bytes: Math.floor(bytes) })
      },
      // Also after the end: an ack past the exit's seq is what releases the agent's record of it.
      ack: (seq) => { if (!closed && seq >= 0) send({ t: 'ack', id, seq: Math.floor(seq) }) }
    }
    return { execution, result, e: { handlers, resolve, reject, nextSeq: firstSeq, pid: 0, allowance, stdinUntaken: 0, stdinClosed: false, done: false, awaitingStartSince: Date.now() } }
  }

  function startTree (opts: { flatten?: boolean, windowBytes?: number }, handlers: AgentExecHandlers): AgentExecution {
    const id = nextId++
    // Uncapped but for the credit, when there is a window.
    const { execution, e } = startExecution(id, handlers, opts.windowBytes ?? Number.MAX_SAFE_INTEGER)
    try {
      // Uncapped: the consumer bounds what it takes through the credit.
      send({ t: 'tree', id, flatten: opts.flatten, window: opts.windowBytes, maxOutputBytes: Number.MAX_SAFE_INTEGER })
    } catch (err) {
      e.reject(err)
      return execution
    }
    execs.set(id, e)
    return execution
  }

  function startExec (argv: readonly string[], opts: AgentExecOptions = {}, handlers: AgentExecHandlers = {}): AgentExecution {
    const id = nextId++
    const { execution, result, e } = startExecution(id, handlers, opts.windowBytes ?? opts.maxOutputBytes ?? AgentLimits.defaultMaxOutputBytes)
    const reject = e.reject
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) {
      reject(createError(ErrorCodes.INVALID_ARGUMENT, 'argv must be a non-empty array of strings'))
      return execution
    }
    let inline: Uint8Array | undefined
    let streamed: AsyncIterable<Uint8Array> | undefined
    const stdin = opts.stdin
    if (stdin instanceof Uint8Array) {
      if (stdin.length <= INLINE_STDIN_BYTES) inline = stdin
      else streamed = (async function * () { yield stdin })()
    } else if (stdin !== undefined) {
      streamed = stdin
    }
    try {
      send({
        t: 'exec',
        id,
        argv: [...argv],
        cwd: opts.cwd,
        env: opts.env,
        uid: opts.uid,
        gid: opts.gid,
        stdin: inline,
        stdinStream: streamed !== undefined ? true : undefined,
        timeoutMs: opts.timeoutMs,
        maxOutputBytes: opts.maxOutputBytes,
        window: opts.windowBytes,
        ...(opts.retain !== undefined ? { retain: true, tag: opts.retain.tag } : {}),
        ...(opts.pty !== undefined ? { pty: true, cols: opts.pty.cols, rows: opts.pty.rows } : {})
      })
    } catch (err) {
      reject(err)
      return execution
    }
    execs.set(id, e)
    if (streamed !== undefined) void pumpStdin(id, e, streamed)
    const signal = opts.signal
    if (signal !== undefined) {
      const onAbort = (): void => { if (!e.done) void killExec(id, osConstants.signals.SIGKILL).catch(() => {}) }
      if (signal.aborted) onAbort()
      else {
        signal.addEventListener('abort', onAbort, { once: true })
        void result.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => {})
      }
    }
    return execution
  }

  async function listExecs (): Promise<AgentRetainedExec[]> {
    const m = await request({ t: 'execs', id: nextId++ })
    // A VM's agent runs under the tenant's root: what it lists is checked and bounded as the agent's own limits are.
    const list = (Array.isArray(m.execs) ? m.execs as unknown[] : []).filter(isRetainedExec).slice(0, AgentLimits.maxExecs)
    // A new exec's id must not be one of theirs: the agent holds them unique across connections.
    for (const x of list) if (x.id >= nextId) nextId = x.id + 1
    return list
  }

  function attachExec (execId: number, opts: { fromSeq: number, windowBytes?: number }, handlers: AgentExecHandlers = {}): AgentExecution {
    if (execId >= nextId) nextId = execId + 1
    // The frames it kept are sent again first, whatever the window: at most retainMaxBytes of them.
    // (Without a window its cap is not known here: it is not bounded.)
    const allowance = opts.windowBytes !== undefined ? opts.windowBytes + AgentLimits.retainMaxBytes : Number.MAX_SAFE_INTEGER
    const { execution, e } = startExecution(execId, handlers, allowance, opts.fromSeq)
    if (execs.has(execId)) {
      e.reject(createError(ErrorCodes.INVALID_ARGUMENT, `exec ${execId} is already attached to this connection`))
      return execution
    }
    try {
      send({ t: 'attach', id: execId, seq: opts.fromSeq, ...(opts.windowBytes !== undefined ? { window: opts.windowBytes } : {}) })
    } catch (err) {
      e.reject(err)
      return execution
    }
    execs.set(execId, e)
    return execution
  }

  const files = createAgentFiles((msg) => request(msg), () => nextId++, (why) => {
    const err = createError(ErrorCodes.PROTOCOL_VIOLATION, why)
    end(err)
    return err
  })

  return {
    async setHostname (name) {
      await request({ t: 'hostname', id: nextId++, name })
    },
    async setIdentity (identity) {
      await request({ t: 'identity', id: nextId++, ...identity })
    },
    startTree,

    async ping (timeoutMs) {
      const m = await request({ t: 'ping', id: nextId++ }, timeoutMs)
      return { version: m.version as number, pid: m.pid as number }
    },
    oldestWaitMs (now = Date.now()) {
      let oldest = now
      for (const p of pending.values()) oldest = Math.min(oldest, p.at)
      for (const e of execs.values()) if (e.awaitingStartSince !== undefined) oldest = Math.min(oldest, e.awaitingStartSince)
      return now - oldest
    },
    abandon: (reason) => end(reason),
    exec: (argv, opts, handlers) => startExec(argv, opts, handlers).result,
    startExec,
    listExecs,
    attachExec,
    kill: (execId, signal) => killExec(execId, signalNumber(signal)),
    files,
    get closed () { return closed },
    get endReason () { return endReason },
    ended,
    async close () {
      if (!closed) {
        stream.end()
        end(createError(ErrorCodes.CONNECTION_CLOSED, 'agent connection closed by the client'))
      }
      await ended
    }
  }
}


/** One well-formed entry of an `execs` answer: counts that are counts, a tag within the agent's bound. */
function isRetainedExec (v: unknown): v is AgentRetainedExec {
  if (typeof v !== 'object' || v === null) return false
  const x = v as Record<string, unknown>
  // Ids past 2^32 are no agent's (it numbers from the host's ids), and would stall this client's own numbering.
  return isCount(x.id) && x.id < 2 ** 32 && isCount(x.pid) && isCount(x.seq) && isCount(x.acked) && x.acked <= x.seq &&
    typeof x.tag === 'string' && x.tag.length > 0 && Buffer.byteLength(x.tag) <= AgentLimits.maxTag &&
    typeof x.ended === 'boolean' && typeof x.attached === 'boolean'
}
