/**
 * A persistent shell in a sandbox (`sb.session()`): the working directory, variables and
 * background jobs of one `run` are there for the next, as in a terminal, and each `run` returns
 * its own exit code and output.
 *
 * The shell is one spawned command (bash when the sandbox has it, else sh) whose stdin stays
 * open. A run writes the command, quoted as one word for `eval` (so a syntax error is the run's,
 * and cannot swallow what follows), with its stdin on /dev/null (so it cannot read the lines
 * meant for the shell), then a line of two markers that print its exit status on stdout and an
 * end line on stderr. Each marker carries a nonce fresh for that run, so output cannot fake the end of
 * a run it does not know. A run's output is what comes before its markers, bounded by
 * `maxOutputBytes`; output between runs (a background job's) belongs to no run and is dropped.
 *
 * A run that outlives its `timeoutMs` is interrupted: SIGINT goes to the shell's process group,
 * whose shell traps it (see PRELUDE), and whose background jobs ignore it (a shell without job
 * control starts them so), so only the running command line ends and the session lives. One that
 * does not end on SIGINT within `interruptGraceMs` is killed with the whole session.
 */
import { randomBytes } from 'node:crypto'
import { createError, ErrorCodes } from '../errors.js'
import type { ExecChunk } from './exec.js'
import type { CommandResult, ExecHandle, SpawnOptions } from './sandbox.js'

export const SessionDefaults = {
  /** Output one run keeps (stdout and stderr together); the rest is dropped and `truncated` set. */
  maxOutputBytes: 16 * 1024 * 1024,
  /** How long an interrupted command has to end on SIGINT before the session is killed. */
  interruptGraceMs: 2000,
  /** How long opening a session may take (the shell's first answer). */
  openTimeoutMs: 30_000,
  /** Longest command line a run takes. */
  maxCommandBytes: 1024 * 1024
}

/** How a session's shell starts. */
export interface SessionOptions {
  /** Working directory the shell starts in. */
  cwd?: string
  /** Variables the shell starts with. */
  env?: Record<string, string>
  /** Who the shell runs as (see `ExecOptions.user`). */
  user?: string | number
}

/** Options of one `run`. */
export interface RunOptions {
  /** Interrupt the command after this long (the run says `reason: 'timeout'`, exit code 124). */
  timeoutMs?: number
  /** Output kept of this run (stdout and stderr together); default `SessionDefaults.maxOutputBytes`. */
  maxOutputBytes?: number
}

/** What a session needs of its sandbox. */
type Spawner = (command: string[], opts: SpawnOptions) => ExecHandle
type Runner = (command: string[]) => Promise<unknown>

const LAUNCH = 'if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc; fi; exec /bin/sh'

/**
 * The shell's first line. Each run is a call of `__warren_run`: `command eval` makes a syntax
 * error the run's (a special builtin's error would end a POSIX shell), and the SIGINT trap's
 * `return` ends the call, so an interrupt stops the rest of the command line, as ^C does at a
 * prompt, and the shell goes on. It answers with its pid, the process group interrupts go to.
 */
const PRELUDE = "__warren_run () { command eval \"$1\" </dev/null; }; trap 'return 130 2>/dev/null || :' INT; echo $$"


/** Quotes `text` for a POSIX shell: one single-quoted word. */
function quote (text: string): string {
  return `'${text.replace(/'/g, "'\\''")}'`
}

/** One stream of a run: what is kept, and the tail not yet known to be output rather than marker. */
class StreamCut {
  private readonly kept: Buffer[] = []
  private pending = Buffer.alloc(0)

  constructor (private readonly marker: Buffer, private readonly tailBytes: number, private readonly take: (n: number) => number) {}

  /** Adds a chunk; returns what follows the marker once it is seen (undefined before). */
  push (data: Uint8Array): Buffer | undefined {
    this.pending = this.pending.length === 0 ? Buffer.from(data) : Buffer.concat([this.pending, data])
    const at = this.pending.indexOf(this.marker)
    if (at >= 0) {
      this.keep(this.pending.subarray(0, at))
      const rest = this.pending.subarray(at + this.marker.length)
      this.pending = Buffer.alloc(0)
      return rest
    }
    // The marker may begin in the last bytes: those wait for the next chunk.
    const safe = Math.max(0, this.pending.length - this.tailBytes)
    this.keep(this.pending.subarray(0, safe))
    this.pending = Buffer.from(this.pending.subarray(safe))
    return undefined
  }

  /** The stream ended without its marker: what is pending is output after all. */
  flush (): void {
    this.keep(this.pending)
    this.pending = Buffer.alloc(0)
  }

  text (): string { return Buffer.concat(this.kept).toString('utf8') }

  private keep (bytes: Buffer): void {
    const n = this.take(bytes.length)
    if (n > 0) this.kept.push(Buffer.from(bytes.subarray(0, n)))
  }
}

/** The run being read: its two streams, and how it ends. */
interface ActiveRun {
  out: StreamCut
  err: StreamCut
  /** Set once stdout's marker was seen: the exit status. */
  exitCode: number | undefined
  errDone: boolean
  /** Whatever follows stdout's marker, until the exit status's end (`__\n`) arrived. */
  statusText: string
  truncated: boolean
  done: (r: RunEnd) => void
}

/** How a run ended: its exit status, and why when it did not end by itself. */
interface RunEnd { exitCode: number, reason?: 'timeout', message?: string }

export class ShellSession {
  private active: ActiveRun | undefined
  private queue: Promise<unknown> = Promise.resolve()
  private ended: Error | undefined
  private pid = 0

  /** @internal Use `sb.session()`. */
  constructor (private readonly shell: ExecHandle, private readonly runner: Runner) {
    void this.read()
  }

  /** True once the shell has ended (closed, killed, or it ran `exit`). */
  get closed (): boolean { return this.ended !== undefined }

  /**
   * Runs a command line in the session's shell and collects its output.
   * @param command a shell command line (several lines are fine); its stdin is /dev/null
   * @returns its exit code and output; `reason: 'timeout'` (exit code 124) when it was interrupted
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `session` once the session has ended, `command` for a bad command
   */
  run (command: string, opts: RunOptions = {}): Promise<CommandResult> {
    if (typeof command !== 'string' || command.includes('\0') || Buffer.byteLength(command) > SessionDefaults.maxCommandBytes) {
      return Promise.reject(createError(ErrorCodes.INVALID_ARGUMENT, `command must be a string of at most ${SessionDefaults.maxCommandBytes} bytes without NUL`, { field: 'command' }))
    }
    const max = opts.maxOutputBytes ?? SessionDefaults.maxOutputBytes
    if (!Number.isSafeInteger(max) || max < 0) return Promise.reject(createError(ErrorCodes.INVALID_ARGUMENT, 'maxOutputBytes must be an integer >= 0', { field: 'maxOutputBytes' }))
    const timeoutMs = opts.timeoutMs
    if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0)) {
      return Promise.reject(createError(ErrorCodes.INVALID_ARGUMENT, 'timeoutMs must be an integer > 0', { field: 'timeoutMs' }))
    }
    return this.enqueue(async () => await this.runNow(command, max, timeoutMs))
  }

  private enqueue (work: () => Promise<CommandResult>): Promise<CommandResult> {
    const run = this.queue.then(work)
    this.queue = run.catch(() => {})
    return run
  }

  /** Ends the shell and every job it started. Closing a closed session is not an error. */
  async close (): Promise<void> {
    if (this.ended === undefined) this.ended = createError(ErrorCodes.INVALID_ARGUMENT, 'the session was closed', { field: 'session' })
    await this.shell.kill().catch(() => {})
    await this.shell.wait().catch(() => {})
  }

  /** @internal The shell's first run: traps SIGINT (see the file's comment) and says its pid. */
  async init (): Promise<void> {
    let r: CommandResult
    try {
      r = await this.enqueue(async () => await this.runNow(PRELUDE, SessionDefaults.maxOutputBytes, SessionDefaults.openTimeoutMs, true))
    } catch (err) {
      await this.close()
      throw err
    }
    this.pid = Number(r.stdout.trim())
    if (r.exitCode !== 0 || !Number.isSafeInteger(this.pid) || this.pid <= 0) {
      const why = this.ended
      await this.close()
      // The shell could not start (its cwd or user refused, the sandbox gone): that error says why.
      throw why ?? createError(ErrorCodes.INTERNAL, `the session's shell did not start: ${r.stderr.trim() || `exit ${r.exitCode}`}`)
    }
  }

  private async runNow (command: string, max: number, timeoutMs: number | undefined, raw = false): Promise<CommandResult> {
    if (this.ended !== undefined) throw this.ended
    const nonce = randomBytes(12).toString('hex')
    const outMark = `__WARREN_${nonce}_`
    const errMark = `__WARREN_${nonce}_END__`
    let room = max
    const started = Date.now()
    const take = (n: number): number => {
      const k = Math.min(n, room)
      room -= k
      if (k < n) run.truncated = true
      return k
    }
    // Each marker follows a newline of its own, so output that does not end in one keeps its last line.
    const run: ActiveRun = {
      out: new StreamCut(Buffer.from(`\n${outMark}`), outMark.length + 1, take),
      err: new StreamCut(Buffer.from(`\n${errMark}\n`), errMark.length + 2, take),
      exitCode: undefined,
      errDone: false,
      statusText: '',
      truncated: false,
      done: () => {}
    }
    const ending = new Promise<RunEnd>((resolve) => { run.done = resolve })
    this.active = run
    // The markers go on a line of their own: nothing the command does can skip them.
    const line = `${raw ? command : `__warren_run ${quote(command)}`}\n__warren_rc=$?; printf '\\n%s%d__\\n' ${outMark} "$__warren_rc"; printf '\\n%s\\n' ${errMark} >&2\n`
    this.shell.write(line).catch((err: unknown) => this.end(err))
    if (timeoutMs !== undefined) this.armTimeout(run, timeoutMs)
    const result = await ending
    return {
      exitCode: result.exitCode,
      stdout: run.out.text(),
      stderr: run.err.text(),
      durationMs: Date.now() - started,
      truncated: run.truncated,
      ...(result.reason !== undefined ? { reason: result.reason } : {}),
      ...(result.message !== undefined ? { message: result.message } : {})
    }
  }

  private armTimeout (run: ActiveRun, timeoutMs: number): void {
    let interrupted = false
    const timer = setTimeout(() => {
      if (this.active !== run) return
      interrupted = true
      // SIGINT to the shell's group: the command ends, the shell (it traps INT) and jobs live.
      this.runner(['/bin/sh', '-c', 'kill -INT "-$1"', 'sh', String(this.pid)]).catch(() => {})
      const grace = setTimeout(() => {
        if (this.active !== run) return
        this.finish(run, { exitCode: 137, reason: 'timeout', message: `the command did not end on SIGINT after ${timeoutMs} ms: the session was killed` })
        void this.close()
      }, SessionDefaults.interruptGraceMs)
      grace.unref?.()
    }, timeoutMs)
    timer.unref?.()
    const done = run.done
    run.done = (r) => {
      clearTimeout(timer)
      done(interrupted && r.reason === undefined ? { exitCode: 124, reason: 'timeout', message: `interrupted after ${timeoutMs} ms` } : r)
    }
  }

  private finish (run: ActiveRun, r: RunEnd): void {
    if (this.active !== run) return
    this.active = undefined
    run.done(r)
  }

  /** Reads the shell's output for as long as it runs, handing each chunk to the run it belongs to. */
  private async read (): Promise<void> {
    try {
      for await (const chunk of this.shell) this.accept(chunk)
      const r = await this.shell.wait()
      this.end(createError(ErrorCodes.INVALID_ARGUMENT, `the session's shell ended (exit ${r.exitCode})`, { field: 'session', exitCode: r.exitCode }), r.exitCode)
    } catch (err) {
      this.end(err)
    }
  }

  private accept (chunk: ExecChunk): void {
    const run = this.active
    if (run === undefined) return // a background job's output between runs
    if (chunk.stream === 'stderr') {
      if (!run.errDone && run.err.push(chunk.data) !== undefined) run.errDone = true
    } else if (run.exitCode === undefined) {
      const rest = run.statusText !== '' ? Buffer.from(chunk.data) : run.out.push(chunk.data)
      if (rest !== undefined) {
        run.statusText += rest.toString('latin1')
        const m = /^(\d+)__\n/.exec(run.statusText)
        if (m !== null) run.exitCode = Number(m[1])
        // Only our printf writes there, and its status is a few digits: anything else is no status.
        else if (run.statusText.length > 16) run.exitCode = 126
      }
    }
    if (run.exitCode !== undefined && run.errDone) this.finish(run, { exitCode: run.exitCode })
  }

  /** The shell is gone: the run under way ends with it (with the shell's exit code), and later runs are refused. */
  private end (err: unknown, exitCode = 137): void {
    this.ended ??= err instanceof Error ? err : new Error(String(err))
    const run = this.active
    if (run === undefined) return
    run.out.flush()
    run.err.flush()
    this.finish(run, { exitCode, message: this.ended.message })
  }
}

/**
 * Starts a session's shell and waits for its first answer.
 * @internal `sb.session()` is the way in.
 */
export async function openSession (spawn: Spawner, runner: Runner, opts: SessionOptions): Promise<ShellSession> {
  const shell = spawn(['/bin/sh', '-c', LAUNCH], {
    openStdin: true,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    ...(opts.env !== undefined ? { env: opts.env } : {}),
    ...(opts.user !== undefined ? { user: opts.user } : {})
  })
  const session = new ShellSession(shell, runner)
  await session.init()
  return session
}
