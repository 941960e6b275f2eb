/**
 * A sandbox as the trainer holds it. Its state is kept by an actor on the trainer's side (the
 * SDK's own actor system) that the control plane's notices update, so `state` is current
 * without a round trip.
 */
import { nanoid } from 'nanoid'
import { Actor, type Ref } from '../actors/index.js'
import type { ExecResult, TerminalSize } from '../backends/types.js'
import { LifecycleDefaults, PauseRequestDefaults, type OutputPage, type SandboxStateNotice, type SandboxView, type TrajectoryPage, type WireExecOptions } from '../cluster/index.js'
import { readTrajectory, type TrajectoryReadOptions } from './trajectory.js'
import { createError, ErrorCodes } from '../errors.js'
import { decodeAll, ExecDefaults, ExecPump, stdinNotOpen, type ExecChunk, type ExecTransport } from './exec.js'
import { SandboxFiles } from './files.js'
import { openSession, type SessionOptions, type ShellSession } from './session.js'
import type { CreateSpec } from './client.js'
import { worthRetrying } from './request-errors.js'
import { forkOf, hibernateOf, resumeOf, snapshotOf, type ForkOptions, type ForkResult, type SnapshotOptions, type SnapshotView } from './snapshots.js'
import { StdinWriter } from './stdin.js'

export interface ExecOptions {
  stdin?: Uint8Array | string
  /** `spawn` only: keep stdin open for `write()` and `closeStdin()` (container sandboxes). */
  openStdin?: boolean
  env?: Record<string, string>
  /** Working directory inside the sandbox (container sandboxes); default `/`. */
  cwd?: string
  /**
   * Who the command runs as (container sandboxes): a name from the sandbox's /etc/passwd, a uid,
   * or `'uid:gid'`. Default root.
   */
  user?: string | number
  timeoutMs?: number
  maxOutputBytes?: number
  onStdout?: (chunk: Uint8Array) => void
  onStderr?: (chunk: Uint8Array) => void
}

/** Options of `spawn`: those of `exec` but the callbacks, and a terminal. */
export interface SpawnOptions extends Omit<ExecOptions, 'onStdout' | 'onStderr'> {
  /**
   * Run on a pseudo-terminal of this size (container sandboxes): stdin, stdout and stderr are the
   * terminal, so all output arrives as stdout; `resize` changes its size. With `openStdin`,
   * writes are typed into it and `closeStdin()` types its EOF character (^D).
   */
  pty?: TerminalSize
}

/** A command to run: an argv, or a string run by `/bin/sh -c`. */
export type Command = string | string[]

/** What `exec` resolves with. */
export interface CommandResult extends ExecResult {
  stdout: string
  stderr: string
}

/** A running command from `spawn`: iterate its output, wait for its end, kill it. */
export interface ExecHandle extends AsyncIterable<ExecChunk> {
  readonly execId: string
  wait (): Promise<ExecResult>
  kill (): Promise<void>
  /**
   * Writes to the command's stdin (spawned with `openStdin`, container sandboxes); resolves when
   * the sandbox holds the bytes, so awaiting each write is the backpressure.
   */
  write (data: Uint8Array | string): Promise<void>
  /** Ends the command's stdin: it reads EOF after what was written. */
  closeStdin (): Promise<void>
  /** Gives the terminal of a command spawned with `pty` a new size (it gets SIGWINCH). */
  resize (size: TerminalSize): Promise<void>
}

export type HandleMessage = SandboxStateNotice | { type: 'view' } | { type: 'forget' }

export const HandleDefaults = {
  /** A lost sandbox (its node went silent) may come back when the node does; its handle waits this long (the directory's retention). */
  lostRetentionMs: 5 * 60_000
}

/** The trainer-side actor of one sandbox: the latest view, updated by notices. */
export class SandboxHandleActor extends Actor<HandleMessage> {
  constructor (public view: SandboxView, private readonly onEnd: () => void = () => {}) { super() }
  receive (m: HandleMessage): unknown {
    if (m.type === 'view') return this.view
    if (m.type === 'forget') { this.ctx.stop(); return undefined }
    this.view = { ...this.view, state: m.state, ...(m.reason !== undefined ? { reason: m.reason } : {}), ...(m.message !== undefined ? { message: m.message } : {}) }
    if (m.state === 'gone' || m.state === 'failed') {
      // An ended sandbox changes no more: the handle keeps its last view, the actor goes.
      this.ctx.stop()
    } else if (m.state === 'lost') {
      // Not the end yet: a node that comes back re-adopts its sandboxes, and they are ready again.
      this.ctx.setTimer('forget', HandleDefaults.lostRetentionMs, { type: 'forget' })
    } else {
      this.ctx.cancelTimer('forget')
    }
    return undefined
  }

  postStop (): void { this.onEnd() }
}

/** The SDK's files API (`sandbox.files`): see `SandboxFiles`. */
export type SandboxFilesApi = SandboxFiles

export class Sandbox {
  readonly files: SandboxFilesApi

  constructor (
    private readonly t: ExecTransport,
    private readonly actor: SandboxHandleActor,
    /** @internal */ readonly ref: Ref<HandleMessage>,
    /** The client's handle of another sandbox (a fork's). */
    private readonly handleOf: (view: SandboxView) => Sandbox = () => { throw new Error('this handle cannot fork') }
  ) {
    this.files = new SandboxFiles(t, () => this.id)
  }

  get id (): string { return this.actor.view.id }
  /** The latest known state (`ready`, `gone`, `lost`, …), kept current by the control plane. */
  get state (): SandboxView['state'] { return this.actor.view.state }
  get labels (): Record<string, string> { return this.actor.view.labels }

  /** Fetches the sandbox's record from the control plane. */
  async info (): Promise<SandboxView> {
    const view = await this.t.request<SandboxView>({ type: 'info', id: this.id }, 10_000)
    this.actor.view = view
    return view
  }

  /**
   * Runs a command to its end and collects its output.
   * @returns exit code, stdout, stderr (UTF-8), duration, truncated
   */
  async exec (command: Command, opts: ExecOptions = {}): Promise<CommandResult> {
    const out: Uint8Array[] = []
    const err: Uint8Array[] = []
    if (opts.openStdin === true) throw createError(ErrorCodes.INVALID_ARGUMENT, 'openStdin is for spawn(): exec() gives stdin up front', { field: 'openStdin' })
    const { pump } = this.start(command, opts, (c) => {
      if (c.stream === 'stdout') { out.push(c.data); opts.onStdout?.(c.data) } else { err.push(c.data); opts.onStderr?.(c.data) }
    })
    const result = await pump.wait()
    return { ...result, stdout: decodeAll(out), stderr: decodeAll(err) }
  }

  /** Starts a command (an argv, or a string for `/bin/sh -c`) and hands back its running handle. */
  spawn (command: Command, opts: SpawnOptions = {}): ExecHandle {
    const { pump, started } = this.start(command, opts, undefined)
    const id = this.id
    const t = this.t
    const stdin = opts.openStdin === true ? new StdinWriter(t, id, pump.execId, started) : undefined
    return {
      execId: pump.execId,
      wait: () => pump.wait(),
      kill: async () => { await t.request({ type: 'exec-kill', id, execId: pump.execId }, 10_000) },
      write: async (data) => { await (stdin ?? stdinNotOpen()).write(typeof data === 'string' ? new TextEncoder().encode(data) : data) },
      closeStdin: async () => { await (stdin ?? stdinNotOpen()).end() },
      resize: async (size) => {
        await started.catch(() => {}) // a resize before the start would find no command
        await t.request({ type: 'exec-resize', id, execId: pump.execId, cols: size.cols, rows: size.rows }, 10_000)
      },
      [Symbol.asyncIterator]: () => ({
        next: async () => {
          const chunk = await pump.next()
          return chunk === undefined ? { done: true, value: undefined } : { done: false, value: chunk }
        }
      })
    }
  }

  /**
   * What happened in the sandbox, a page at a time: its header (from seq 0), then its steps —
   * every command (argv, env, cwd, stdin, exit, outputs), file change, egress connection,
   * snapshot, pause and resume — numbered; read on from `nextSeq` (`client.steps(id)` pages for
   * you). Kept by the control plane, so it reads the same after the sandbox has ended.
   */
  async trajectory (opts: TrajectoryReadOptions = {}): Promise<TrajectoryPage> {
    return await readTrajectory(this.t, this.id, opts)
  }

  /**
   * Ends the sandbox. Resolves once it has ended and its node's capacity is free again (a
   * create sent next finds the room); `state` is then `gone`. Killing one that has already
   * ended is not an error.
   * @throws WARREN_ERR_TIMEOUT when it did not end within the cluster's wait (it still ends)
   */
  async kill (): Promise<void> {
    const view = await this.t.request<SandboxView>({ type: 'kill', id: this.id }, LifecycleDefaults.endWaitMs + LifecycleDefaults.marginMs * 2)
    this.ended(view)
  }

  /**
   * Lengthens or shortens the sandbox's life: it now ends `ms` from now (as E2B's
   * `setTimeout`). Its whole life, from its creation, stays within the cluster's maximum TTL.
   * @returns when it will end (ms since the epoch, the control plane's clock); `info()` and `list()` say so too
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `ttlMs` (with `details.max`) beyond the maximum; WARREN_ERR_SANDBOX_GONE once it has ended
   */
  async setTtl (ms: number): Promise<number> {
    const view = await this.t.request<SandboxView>({ type: 'set-ttl', id: this.id, ttlMs: ms }, 15_000)
    this.actor.view = view
    return view.expiresAt
  }

  /**
   * Freezes the sandbox (container sandboxes): its processes stop where they are, its memory is
   * kept, and its CPU is free for other sandboxes. While paused, commands and file operations are
   * refused with WARREN_ERR_SANDBOX_PAUSED; `info`, `setTtl` and `kill` work. Pausing a paused
   * sandbox is not an error. Its TTL keeps counting unless the spec says `pausedTtl: false`.
   * @returns its view, `state` `paused`
   * @throws WARREN_ERR_UNSUPPORTED naming `backend` for a backend that cannot pause
   */
  async pause (): Promise<SandboxView> {
    return await this.freeze('pause')
  }

  /**
   * Thaws a paused sandbox: its processes go on where they stopped. Resuming a running sandbox is
   * not an error. With `pausedTtl: false` its `expiresAt` has moved on by the time it was paused.
   * A hibernated sandbox is created again from its snapshot, with the same id: its files are as
   * they were, its processes are not.
   * @returns its view, `state` `ready`
   */
  async resume (): Promise<SandboxView> {
    const view = await resumeOf(this.t, this.id)
    this.actor.view = view
    return view
  }

  /**
   * Cuts a snapshot of the sandbox's file system (container sandboxes; processes are frozen
   * while it is cut, and go on after). Create from it with `client.create({ snapshot: id or name })`.
   * With `memory` (microvm sandboxes), the whole VM instead: sandboxes made from it go on running
   * its processes.
   * @returns the snapshot: its id, and its whole layer stack
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `name` or `memory`; WARREN_ERR_UNSUPPORTED naming `backend` or `memory`; WARREN_ERR_QUOTA past the tenant's snapshots
   */
  async snapshot (opts: SnapshotOptions = {}): Promise<SnapshotView> {
    return await snapshotOf(this.t, this.id, opts)
  }

  /**
   * One snapshot of the sandbox, then `count` (1–1000) sandboxes from it in one request, `spec`
   * laid over this sandbox's (labels, env and limits merged key by key, the rest replaced). Each
   * fork has its own outcome: when some find no room, the others are still made. With
   * `opts.memory` (microvm), the forks go on running this sandbox's processes (limits and
   * backend cannot then change).
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `count`; BAD_SPEC naming a field of `spec`; QUOTA when the tenant cannot hold `count` more
   */
  async fork (count: number, spec?: Omit<CreateSpec, 'snapshot' | 'image'>, opts: ForkOptions = {}): Promise<ForkResult<Sandbox>> {
    return await forkOf(this.t, this.id, count, spec as Record<string, unknown> | undefined, this.handleOf, opts)
  }

  /**
   * Snapshots the sandbox and ends it on its node, keeping its record: `state` `hibernated`, no
   * node, CPU, memory or quota held. `resume()` (or `client.attach(id)`) creates it again from
   * the snapshot with the same id. Its TTL keeps counting; a kill ends it for good.
   * @returns its view, `state` `hibernated`, `snapshot` the snapshot it resumes from
   */
  async hibernate (): Promise<SandboxView> {
    const view = await hibernateOf(this.t, this.id)
    this.actor.view = view
    return view
  }

  private async freeze (type: 'pause' | 'resume'): Promise<SandboxView> {
    const view = await this.t.request<SandboxView>({ type, id: this.id }, PauseRequestDefaults.sandboxAskMs + LifecycleDefaults.marginMs)
    this.actor.view = view
    return view
  }

  /** @internal The sandbox has ended (a kill's answer): the handle says so at once, and its actor goes. */
  ended (view: Pick<SandboxView, 'state'> & Partial<SandboxView>): void {
    this.actor.view = { ...this.actor.view, ...view }
    this.ref.tell({ type: 'sandbox-state', id: this.id, state: this.actor.view.state, ...(view.reason !== undefined ? { reason: view.reason as SandboxStateNotice['reason'] } : {}) })
  }

  /**
   * Opens a persistent shell (bash when the sandbox has it, else sh; container sandboxes) in which
   * the working directory, variables and background jobs carry from one `run` to the next.
   */
  async session (opts: SessionOptions = {}): Promise<ShellSession> {
    return await openSession((command, spawnOpts) => this.spawn(command, spawnOpts), (command) => this.exec(command), opts)
  }

  private start (command: Command, opts: SpawnOptions, onChunk: ((c: ExecChunk) => void) | undefined): { pump: ExecPump, started: Promise<OutputPage> } {
    // A string is a shell command line, as a terminal would take it.
    const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : command
    const execId = nanoid(16)
    const pump = new ExecPump(this.t, this.id, execId, onChunk)
    const wire: WireExecOptions = {
      ...(opts.stdin !== undefined ? { stdin: typeof opts.stdin === 'string' ? new TextEncoder().encode(opts.stdin) : opts.stdin } : {}),
      ...(opts.env !== undefined ? { env: opts.env } : {}),
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(opts.user !== undefined ? { user: String(opts.user) } : {}),
      ...(opts.pty !== undefined ? { pty: { cols: opts.pty.cols, rows: opts.pty.rows } } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.maxOutputBytes !== undefined ? { maxOutputBytes: opts.maxOutputBytes } : {}),
      ...(opts.openStdin === true ? { openStdin: true } : {})
    }
    const message = { type: 'exec', id: this.id, execId, argv, opts: wire }
    // Starting is idempotent by execId, so a start lost with a socket is simply sent again.
    const send = async (attempt: number): Promise<OutputPage> => {
      try {
        return await this.t.request<OutputPage>(message, ExecDefaults.readWaitMs + ExecDefaults.marginMs)
      } catch (err) {
        if (attempt < 5 && worthRetrying(err, this.t)) return await send(attempt + 1)
        throw err
      }
    }
    const started = send(0)
    started.then((first) => pump.start(first), (e: unknown) => pump.abort(e))
    return { pump, started }
  }
}
