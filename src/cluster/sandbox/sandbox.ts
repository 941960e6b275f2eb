/**
 * Sandbox: one isolated environment, as an actor on its node. It drives its backend through
 * `creating → ready → stopping → gone`, or to `failed` with a reason, and reports every change.
 *
 * Commands run concurrently (the actor never waits on one), each with its own ExecOutput that
 * consumers pull from by sequence number. The sandbox ends on kill, TTL, idle timeout or
 * failure; whichever way, postStop kills the backend sandbox, so nothing outlives the actor.
 */
import { Actor, type ExitReason } from '../../actors/index.js'
import { checkTimeoutBound, type AdoptedExec, type ExecResult, type SandboxHandle } from '../../backends/types.js'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { parseArgv, placementRequestOf } from '../spec.js'
import { sandboxEnvironment } from '../spec-determinism.js'
import { ExecOutput } from './exec-output.js'
import { outputHandlers, refuseResumed, resumeOf } from './resume.js'
import { OutputPool, type ExecCredit } from './output-pool.js'
import { expiryAfterResume, PauseControl, ttlDue } from './pause.js'
import { SandboxFileService } from './sandbox-files.js'
import { snapshotSandbox } from './snapshot.js'
import { StdinPipe } from './stdin-pipe.js'
import { ExecTerminalControl } from './terminal.js'
import { NodeTrajectoryDefaults, type ExecRecording } from '../trajectory/index.js'
import { checkTtl } from './ttl.js'
import { SandboxDefaults, type EndReason, type SandboxArgs, type SandboxInfo, type SandboxMessage, type SandboxMeta, type SandboxState, type WireExecOptions } from './sandbox-types.js'

/** The recording of a command whose step the trajectory already holds (a restore re-runs it). */
const UNRECORDED: ExecRecording = { output () {}, stdin () {}, end () {} }

interface RunningExec {
  output: ExecOutput
  abort: AbortController
  stdin: StdinPipe | undefined
  record: ExecRecording
  /** Its pseudo-terminal, when it runs on one. */
  terminal: ExecTerminalControl | undefined
  /** Taken up after a node restart: its stdin and terminal stayed with the old node (see `refuseResumed`). */
  resumed?: boolean
}

export class Sandbox extends Actor<SandboxMessage> {
  private state: SandboxState = 'creating'
  private handle: SandboxHandle | undefined
  private readonly execs = new Map<string, RunningExec>()
  /** Ids of commands ended and read, the newest `SandboxDefaults.finishedExecIds` (a Set keeps insertion order). */
  private readonly finished = new Set<string>()
  private readonly createdAt: number
  private expiresAt: number
  private lastExecAt = Date.now()
  private endReason: EndReason | undefined
  private endMessage: string | undefined
  private startErrorCode: string | undefined
  private startErrorField: string | undefined
  private unwatch: (() => void) | undefined
  private unwatchEgress: (() => void) | undefined
  private readonly outputPool: OutputPool
  private readonly fileService: SandboxFileService
  private readonly freeze: PauseControl

  constructor (private readonly args: SandboxArgs) {
    super()
    this.createdAt = args.adopted?.createdAt ?? Date.now()
    this.expiresAt = this.createdAt + args.spec.ttlMs
    this.outputPool = args.output ?? new OutputPool()
    this.fileService = new SandboxFileService(args.backend, args.files, args.fileBudget, args.trajectory)
    this.freeze = new PauseControl({ id: args.id, backend: args.backend, handle: () => this.handle!, changed: (paused, frozenMs, execs) => this.frozen(paused, frozenMs, execs) }, args.adopted?.paused === true)
  }

  async preStart (): Promise<void> {
    const { spec } = this.args
    try {
      const meta: SandboxMeta = { id: this.args.id, tenant: this.args.tenant, spec, createdAt: this.createdAt }
      this.handle = this.args.adopted?.handle ?? await this.args.backend.create({
        id: this.args.id, tenant: this.args.tenant, ...sandboxEnvironment(spec), limits: spec.limits, layers: placementRequestOf(spec).layers, meta,
        ...(spec.network !== undefined ? { egress: spec.network.egress } : {}),
        ...(spec.memory !== undefined ? { memory: spec.memory } : {})
      })
    } catch (err) {
      this.endReason = 'failed'
      this.endMessage = err instanceof Error ? err.message : String(err)
      this.startErrorCode = isWarrenError(err) ? err.code : undefined
      const field = isWarrenError(err) ? err.details?.field : undefined
      this.startErrorField = typeof field === 'string' ? field : undefined
      this.setState('failed')
      this.ctx.stop('normal')
      return
    }
    this.unwatch = this.args.backend.onGone?.(this.handle, (message, reason) => this.self.tell({ type: 'backend-gone', message, ...(reason !== undefined ? { reason } : {}) }))
    this.unwatchEgress = this.args.backend.onEgress?.(this.handle, (event) => this.args.trajectory.egress(event))
    // Commands that ran on while the node was down: taken up under their old ids.
    for (const x of this.args.adopted?.execs ?? []) this.reattach(x)
    // Adopted paused, its commands are known at its first resume (the recorder settles them if it ends first).
    if (!this.freeze.paused) this.args.trajectory.settleResumable()
    this.setState(this.freeze.paused ? 'paused' : 'ready')
    this.armTtl()
    const sweepMs = Math.min(60_000, spec.idleTimeoutMs > 0 ? Math.max(10, spec.idleTimeoutMs / 4) : 60_000)
    this.ctx.setTimer('sweep', sweepMs, { type: 'sweep' }, { repeat: true })
  }

  receive (m: SandboxMessage): unknown {
    switch (m.type) {
      case 'exec': {
        // Starting a command answers with its first page, so a short command costs one round trip.
        // One started to be written to answers at once: its writer waits for this answer, and
        // such a command is often silent until it has read something.
        const { execId } = this.exec(m.execId, m.argv, m.opts ?? {}, m.unrecorded === true)
        return this.read(execId, 0, undefined, m.opts?.openStdin === true ? 0 : undefined)
      }
      case 'read': return this.read(m.execId, m.fromSeq, m.maxBytes, m.waitMs)
      case 'exec-kill': {
        this.execs.get(m.execId)?.abort.abort()
        return true
      }
      case 'exec-resize': {
        this.freeze.refuse('resize a terminal')
        const exec = this.running(m.execId)
        if (exec.resumed === true) refuseResumed(m.execId, 'pty')
        if (exec.terminal === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `command ${m.execId} was not started with pty`, { field: 'pty' })
        exec.terminal.resize({ cols: m.cols, rows: m.rows })
        return true
      }
      case 'stdin': {
        this.freeze.refuse('write to a command')
        const exec = this.running(m.execId)
        if (exec.resumed === true) refuseResumed(m.execId, 'openStdin')
        if (exec.stdin === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `command ${m.execId} was not started with openStdin`, { field: 'openStdin' })
        const before = exec.stdin.received
        const ack = exec.stdin.write(m.offset, m.data, m.eof)
        // The bytes this write added (a retried chunk adds none), for the command's step.
        if (ack.received > before && m.data !== undefined) exec.record.stdin(m.data.subarray(before - m.offset, ack.received - m.offset))
        return ack
      }
      case 'trajectory-flush':
        return this.ctx.answerLater(this.args.trajectory.flush(NodeTrajectoryDefaults.flushWaitMs).then(() => true))
      case 'info': return this.info()
      case 'kill':
        this.end(m.reason ?? 'killed')
        return true
      case 'set-ttl': return this.setTtl(m.ttlMs)
      case 'files':
        this.requireReady()
        this.ctx.answerLater(this.fileService.handle(this.handle!, m.req, m.unrecorded !== true))
        return undefined
      case 'expire':
        this.end(m.reason)
        return undefined
      case 'sweep':
        this.sweep()
        return undefined
      case 'backend-gone':
        // Not a kill we were asked for: the trainer learns it failed, and why.
        this.endMessage = m.message
        this.end(m.reason ?? 'failed')
        return undefined
      case 'pause':
      case 'resume':
        this.requireLive()
        this.ctx.answerLater((m.type === 'pause' ? this.freeze.pause() : this.freeze.resume()).then(() => this.info()))
        return undefined
      case 'snapshot':
        this.requireLive()
        this.ctx.answerLater(snapshotSandbox({ id: this.args.id, backend: this.args.backend, handle: this.handle!, pushBlob: this.args.pushBlob, serial: (w) => this.freeze.serial(w) }, m.flatten === true, m.memory === true)
          .then((cut) => { if (m.snapshot !== undefined) this.args.trajectory.snapshot(m.snapshot, cut.layer); return cut }))
        return undefined
    }
  }

  /**
   * The backend froze or thawed the sandbox: the TTL and idle clocks follow, and the node is told.
   * At the first thaw of a sandbox adopted paused, its commands that outlived the agent are taken up.
   */
  private frozen (paused: boolean, frozenMs: number, execs: AdoptedExec[]): void {
    if (this.state !== 'ready' && this.state !== 'paused') return // it ended meanwhile
    if (paused) this.args.trajectory.pause(); else this.args.trajectory.resume()
    if (!paused) {
      for (const x of execs) this.reattach(x)
      this.args.trajectory.settleResumable()
    }
    if (!paused) {
      this.expiresAt = expiryAfterResume({ expiresAt: this.expiresAt, createdAt: this.createdAt, frozenMs, pausedTtl: this.args.spec.pausedTtl })
      this.lastExecAt = Date.now() // a resume is use: the idle clock starts again
    }
    this.armTtl()
    this.setState(paused ? 'paused' : 'ready')
  }

  private armTtl (): void {
    const due = ttlDue({ expiresAt: this.expiresAt, createdAt: this.createdAt, frozen: this.freeze.frozen, pausedTtl: this.args.spec.pausedTtl })
    this.ctx.setTimer('ttl', Math.max(0, due - Date.now()), { type: 'expire', reason: 'ttl' })
  }

  /** Starts a command and answers at once; its output is pulled with `read`. */
  private exec (execId: unknown, argvIn: unknown, opts: WireExecOptions, unrecorded: boolean): { execId: string } {
    this.requireReady()
    if (typeof execId !== 'string' || execId.length === 0 || execId.length > SandboxDefaults.maxExecIdLength) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'execId must be a short string', { field: 'execId' })
    }
    if (this.execs.has(execId)) return { execId } // a retried request after a reconnect: already running
    // A start sent again after the command ran and was read (the first copy waited queued, the
    // client sent another): the command is not run twice.
    if (this.finished.has(execId)) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `command ${execId} already ran to its end and was read: a new command takes a new execId`, { field: 'execId' })
    }
    const running = this.runningCount()
    if (running >= SandboxDefaults.maxConcurrentExecs) {
      throw createError(ErrorCodes.OVERLOADED, `sandbox ${this.args.id} runs ${running} commands already`, { retryAfterMs: 100 })
    }
    const argv = parseArgv(argvIn)
    checkTimeoutBound(opts.timeoutMs, this.args.backend.maxTimeoutMs)
    if (opts.openStdin === true && this.args.backend.interactiveStdin !== true) {
      throw createError(ErrorCodes.UNSUPPORTED, `the ${this.args.backend.kind} backend takes stdin only up front (opts.stdin)`, { field: 'openStdin' })
    }
    if (opts.openStdin === true && opts.stdin !== undefined) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'give stdin up front or keep it open, not both', { field: 'openStdin' })
    }
    for (const field of ['cwd', 'user'] as const) {
      if (opts[field] !== undefined && this.args.backend.commandIdentity !== true) {
        throw createError(ErrorCodes.UNSUPPORTED, `the ${this.args.backend.kind} backend does not take ${field}`, { field })
      }
    }
    if (opts.pty !== undefined && this.args.backend.terminal !== true) {
      throw createError(ErrorCodes.UNSUPPORTED, `the ${this.args.backend.kind} backend has no pseudo-terminals`, { field: 'pty' })
    }
    const maxOutputBytes = this.outputCap(opts.maxOutputBytes)
    const stdin = opts.openStdin === true ? new StdinPipe() : undefined
    const credit = this.openCredit(maxOutputBytes)
    const output = new ExecOutput(credit, this.args.meter)
    const abort = new AbortController()
    const resume = resumeOf(this.args.backend, execId, output)
    if (!unrecorded) this.args.trajectory.admitStep()
    const record = unrecorded ? UNRECORDED : this.args.trajectory.exec(execId, argv, { ...opts, resumable: resume.resume !== undefined })
    const terminal = opts.pty !== undefined ? new ExecTerminalControl(opts.pty) : undefined
    this.execs.set(execId, { output, abort, stdin, record, terminal })
    this.lastExecAt = Date.now()
    const started = Date.now()
    const run = this.args.backend.exec(this.handle!, argv, {
      ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
      ...(stdin !== undefined ? { stdin } : {}),
      ...(opts.env !== undefined ? { env: opts.env } : {}),
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(opts.user !== undefined ? { user: opts.user } : {}),
      ...(terminal !== undefined ? { pty: terminal } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}),
      ...(this.args.backend.outputCredit === true ? { credit } : {}),
      ...resume,
      ...outputHandlers(output, record),
      signal: abort.signal
    })
    this.follow(run, output, record, started, stdin)
    return { execId }
  }

  /** Commands of this sandbox not finished yet. */
  private runningCount (): number {
    let n = 0
    for (const e of this.execs.values()) if (!e.output.finished) n++
    return n
  }

  /**
   * Takes up a command that outlived the node agent (`Backend.reattach`): its output goes on from
   * the seq its consumer had acknowledged, under its old id, so the consumer's pulls go on.
   */
  private reattach (x: AdoptedExec): void {
    const backend = this.args.backend
    if (backend.reattach === undefined || this.execs.has(x.tag)) return
    // What the sandbox lists is its own to say (a VM's agent runs under the tenant's root): no more
    // are taken up than it could have run, so it cannot hold more of the node's output buffer.
    if (this.runningCount() >= SandboxDefaults.maxConcurrentExecs) return
    const credit = this.openCredit(undefined)
    const output = new ExecOutput(credit, this.args.meter, x.fromSeq)
    const abort = new AbortController()
    const record = this.args.trajectory.resumeExec(x.tag, x.fromSeq) ?? UNRECORDED
    this.execs.set(x.tag, { output, abort, stdin: undefined, record, terminal: undefined, resumed: true })
    const started = Date.now()
    const run = backend.reattach(this.handle!, x.tag, {
      fromSeq: x.fromSeq,
      ...(backend.outputCredit === true ? { credit } : {}),
      ...resumeOf(backend, x.tag, output),
      ...outputHandlers(output, record),
      signal: abort.signal
    }).catch((err: unknown): ExecResult => ({
      // Gone from the agent after all (it ended and its record expired): lost with the old node.
      exitCode: 137, durationMs: Date.now() - started, truncated: false, reason: 'killed',
      message: `the command did not outlive the node agent: ${err instanceof Error ? err.message : String(err)}`
    }))
    this.follow(run, output, record, started, undefined)
  }

  /** Follows a command to its end: its result (or why it could not run) goes to its output and its step. */
  private follow (run: Promise<ExecResult>, output: ExecOutput, record: ExecRecording, started: number, stdin: StdinPipe | undefined): void {
    run.then(
      (result) => { output.finish(result); record.end(result) },
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err)
        if (isWarrenError(err) && typeof err.details?.field === 'string') {
          // Refused for what it asked (a cwd that is not there, an unknown user): the request
          // fails with the error that names the field, as a bad option given up front would.
          output.fail(err)
          record.end({ exitCode: 126, durationMs: Date.now() - started, truncated: false, message })
          return
        }
        // The command could not run at all: report it as a result so the reader always ends.
        output.append('stderr', new TextEncoder().encode(`warren: ${isWarrenError(err) ? err.code + ': ' : ''}${message}\n`))
        const result: ExecResult = { exitCode: isWarrenError(err, ErrorCodes.NOT_FOUND) ? 127 : 126, durationMs: Date.now() - started, truncated: false, message }
        output.finish(result)
        record.end(result)
      }
    ).finally(() => { stdin?.close(); this.lastExecAt = Date.now() })
  }

  /**
   * The output cap a command runs with. The cluster bounds it (`OutputDefaults.maxOutputBytes`);
   * a backend that cannot pause its output is held to what the node buffers for one command,
   * so what it holds unread stays within that too.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `maxOutputBytes` when it is not an integer within the bound
   */
  private outputCap (asked: unknown): number | undefined {
    const { maxOutputBytes, execBufferBytes } = this.outputPool.limits
    const bound = this.args.backend.outputCredit === true ? maxOutputBytes : Math.min(maxOutputBytes, execBufferBytes)
    if (asked === undefined) return this.args.backend.outputCredit === true ? undefined : bound
    if (typeof asked !== 'number' || !Number.isInteger(asked) || asked < 0 || asked > bound) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `maxOutputBytes must be an integer from 0 to ${bound} on the ${this.args.backend.kind} backend`, {
        field: 'maxOutputBytes', max: bound
      })
    }
    return asked
  }

  /**
   * This command's share of the node's output buffer. One whose backend cannot pause it has its
   * whole cap set aside, and is refused while the node holds too much unread output.
   * @throws WARREN_ERR_OVERLOADED when the node cannot hold such a command's output now
   */
  private openCredit (maxOutputBytes: number | undefined): ExecCredit {
    if (this.args.backend.outputCredit === true) return this.outputPool.openExec()
    const credit = this.outputPool.reserve(maxOutputBytes ?? this.outputPool.limits.execBufferBytes)
    if (credit === undefined) {
      throw createError(ErrorCodes.OVERLOADED, `node holds too much unread output to start a ${this.args.backend.kind} command; read or end others`, { retryAfterMs: 1000 })
    }
    return credit
  }

  /**
   * A command of this sandbox, running or with output still held.
   * @throws WARREN_ERR_NOT_FOUND for one it does not know (never started here, or read to its end)
   */
  private running (execId: string): RunningExec {
    const exec = this.execs.get(execId)
    if (exec === undefined) throw createError(ErrorCodes.NOT_FOUND, `no command ${execId} in sandbox ${this.args.id}`)
    return exec
  }

  /** Drops a command read to its end, remembering its id. */
  private forgetExec (execId: string, exec: RunningExec): void {
    if (this.execs.get(execId) !== exec) return
    this.execs.delete(execId)
    exec.output.dispose()
    this.finished.add(execId)
    if (this.finished.size > SandboxDefaults.finishedExecIds) this.finished.delete(this.finished.values().next().value!)
  }

  /** Answers (deferred) with an OutputPage; waiting for output never blocks other messages. */
  private read (execId: string, fromSeq: unknown, maxBytes: unknown, waitMs: unknown): void {
    const exec = this.running(execId)
    if (typeof fromSeq !== 'number' || !Number.isInteger(fromSeq) || fromSeq < 0) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, 'fromSeq must be an integer >= 0', { field: 'fromSeq' })
    }
    // maxBytes 0 is a status read: no chunks, only whether (and how) the command has ended.
    const limit = maxBytes === 0 ? 0 : typeof maxBytes === 'number' && maxBytes > 0 ? Math.min(maxBytes, SandboxDefaults.maxPageBytes) : SandboxDefaults.maxPageBytes
    const wait = typeof waitMs === 'number' && waitMs >= 0 ? Math.min(waitMs, SandboxDefaults.maxReadWaitMs) : SandboxDefaults.maxReadWaitMs
    this.ctx.answerLater(exec.output.read(fromSeq, limit, wait).then((page) => {
      if (exec.output.drained) this.forgetExec(execId, exec)
      return page
    }, (err: unknown) => { this.forgetExec(execId, exec); throw err }))
  }

  /**
   * Moves the sandbox's end to `ttlMs` from now.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `ttlMs` beyond `checkTtl`'s bound
   */
  private setTtl (ttlMs: unknown): SandboxInfo {
    this.requireLive()
    const now = Date.now()
    this.expiresAt = checkTtl(ttlMs, this.createdAt, now, this.args.id)
    this.freeze.restartCount(now)
    this.armTtl()
    return this.info()
  }

  info (): SandboxInfo {
    return {
      id: this.args.id,
      tenant: this.args.tenant,
      state: this.state,
      backend: this.args.spec.backend,
      labels: this.args.spec.labels,
      createdAt: this.createdAt,
      expiresAt: this.expiresAt,
      ...(this.endReason !== undefined ? { reason: this.endReason } : {}),
      ...(this.endMessage !== undefined ? { message: this.endMessage } : {}),
      ...(this.freeze.seq > 0 ? { pauseSeq: this.freeze.seq } : {}),
      ...(this.handle?.warm === true ? { warm: true } : {})
    }
  }

  private sweep (): void {
    const now = Date.now()
    const idle = this.args.spec.idleTimeoutMs
    this.fileService.sweep(now)
    const busy = [...this.execs.values()].some((e) => !e.output.finished)
    if (idle > 0 && !busy && !this.freeze.paused && now - this.lastExecAt >= idle) { this.end('idle'); return }
    for (const [id, e] of this.execs) {
      if (e.output.finished && now - e.output.lastReadAt > SandboxDefaults.outputRetentionMs) this.forgetExec(id, e)
    }
  }

  private requireReady (): void {
    this.requireLive()
    this.freeze.refuse('run commands or use its files')
  }

  /** Refuses what an ended (or ending) sandbox cannot do; a paused one passes. */
  private requireLive (): void {
    if (this.state !== 'ready' && this.state !== 'paused') {
      throw createError(ErrorCodes.SANDBOX_GONE, `sandbox ${this.args.id} is ${this.state}`, { id: this.args.id, state: this.state })
    }
  }

  private end (reason: EndReason): void {
    if (this.state === 'stopping' || this.state === 'gone' || this.state === 'failed') return
    this.endReason = reason
    this.setState('stopping')
    this.ctx.stop('normal')
  }

  private setState (state: SandboxState): void {
    this.state = state
    this.args.report({
      id: this.args.id,
      tenant: this.args.tenant,
      state,
      ...(this.endReason !== undefined ? { reason: this.endReason } : {}),
      ...(this.endMessage !== undefined ? { message: this.endMessage } : {}),
      ...(this.startErrorCode !== undefined ? { code: this.startErrorCode } : {}),
      ...(this.startErrorField !== undefined ? { field: this.startErrorField } : {}),
      ...(state === 'paused' || (state === 'ready' && this.freeze.seq > 0) ? { pauseSeq: this.freeze.seq, expiresAt: this.expiresAt } : {})
    })
  }

  /** Reclaim: runs however the actor ends, including a crash or a node shutdown. */
  async postStop (reason: ExitReason): Promise<void> {
    this.unwatch?.()
    this.unwatchEgress?.()
    this.fileService.close()
    if (this.endReason === undefined) this.endReason = reason === 'shutdown' ? 'node-shutdown' : reason === 'normal' ? 'killed' : 'failed'
    const gone: ExecResult = { exitCode: 137, durationMs: 0, truncated: false, reason: 'killed', message: `sandbox ended: ${this.endReason}` }
    // Readers still waiting get their last page; then what is held goes back to the node.
    for (const e of this.execs.values()) { e.abort.abort(); e.output.close(gone); e.output.dispose() }
    if (this.handle !== undefined) {
      try { await this.args.backend.kill(this.handle) } catch { /* the backend reclaims on close as well */ }
    }
    // Its steps are all final and (the control plane willing) stored before anyone learns it ended.
    await this.args.trajectory.close().catch(() => {})
    if (this.state !== 'failed') this.setState('gone')
  }
}
