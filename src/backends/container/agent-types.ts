/**
 * The public shapes of the agent client: what an exec takes and returns, and what file
 * operations see. Raw facts from inside the sandbox; the container Backend maps them onto
 * `ExecResult` (exit code 124 for a timeout and so on).
 */

/** How one command runs in the sandbox. Every field is optional. */
export interface AgentExecOptions {
  /** Working directory inside the sandbox; default `/`. */
  cwd?: string
  /** Laid over the agent's defaults (PATH, HOME). */
  env?: Record<string, string>
  /** Run as this uid (default 0, root with the sandbox's reduced capabilities). */
  uid?: number
  /** Run as this gid (default: the uid). */
  gid?: number
  /**
   * Standard input: bytes sent with the request, or an async iterable streamed in frames (the
   * command sees EOF when it ends). Without it the command's stdin is at EOF from the start.
   */
  stdin?: Uint8Array | AsyncIterable<Uint8Array>
  /** Wall-clock limit; the agent SIGKILLs the command's whole process group when it passes. */
  timeoutMs?: number
  /** Cap on stdout + stderr bytes together (default 16 MiB); the rest is dropped, `truncated`. */
  maxOutputBytes?: number
  /**
   * Output credit: the agent sends at most this many bytes of output, and reads no more from
   * the command's pipes, until `AgentExecution.grant` gives more. Without it there is no limit.
   */
  windowBytes?: number
  /**
   * Run on a pseudo-terminal of this size: the command's stdin, stdout and stderr are the
   * terminal (its controlling one), and all its output arrives through `onStdout`.
   */
  pty?: { cols: number, rows: number }
  /** Aborting it SIGKILLs the command's process group (`killed` in the result). */
  signal?: AbortSignal
  /**
   * Resumable: the command outlives this connection (a crashed or restarted host re-attaches
   * with `attachExec`), its output kept by the agent until acknowledged with
   * `AgentExecution.ack`; `tag` (at most `AgentLimits.maxTag` bytes) is how the host finds it again.
   */
  retain?: { tag: string }
}

/** Receivers of an exec's events, called in the order the agent sent them. */
export interface AgentExecHandlers {
  /** The command is running; `pid` is its PID inside the sandbox. */
  onStart?: (info: { execId: number, pid: number }) => void
  /** A chunk of standard output. A handler that throws kills the command; exec rejects with the error. */
  onStdout?: (chunk: Uint8Array) => void
  /** A chunk of standard error, like `onStdout`. */
  onStderr?: (chunk: Uint8Array) => void
}

/** How a command ended. */
export interface AgentExecResult {
  /** The exit status, or 128 + the signal number when a signal ended it (as a shell reports it). */
  exitCode: number
  /** The signal that ended the main process, if one did. */
  signal?: number
  /** The agent killed it because `timeoutMs` passed. */
  timedOut: boolean
  /** Output beyond `maxOutputBytes` was dropped. */
  truncated: boolean
  /** A kill (or an abort) was sent while it ran. */
  killed: boolean
  /** From the agent receiving the request to the main process ending, measured by the agent. */
  durationMs: number
  /** Its PID inside the sandbox. */
  pid: number
}

/** A command in flight, for callers that stream stdin or kill it by hand. */
export interface AgentExecution {
  /** The exec's id on this connection (what `kill` takes). */
  readonly execId: number
  /** Resolves with the result; rejects when the command could not start or the connection broke. */
  readonly result: Promise<AgentExecResult>
  /** Sends a signal (default SIGKILL) to the command's process group. */
  kill (signal?: number | NodeJS.Signals): Promise<void>
  /** Gives the terminal of an exec started with `pty` a new size (the command gets SIGWINCH). */
  resize (size: { cols: number, rows: number }): Promise<void>
  /** Grants `bytes` more output credit (an exec started with `windowBytes`); ignored once it ended. */
  grant (bytes: number): void
  /**
   * A resumable exec: out frames below `seq` are had for good (the agent frees them); a seq
   * past the exit's releases the agent's record of the end. Ignored for others.
   */
  ack (seq: number): void
}

export type { FileEntry, FileStat, FileType } from '../types.js'
import type { FileEntry, FileStat } from '../types.js'

/** Options of `files.read`. */
export interface ReadOptions {
  /** Start at this byte. */
  offset?: number
  /** Read at most this many bytes (at most `AgentLimits.maxFileBytes`); without it, the whole rest, which must fit that limit. */
  length?: number
}

/** Options of `files.write`. */
export interface WriteOptions {
  /** Permission bits of the file (default 0644 for a new file; applied to an existing one when given). */
  mode?: number
  /** Append instead of replacing. */
  append?: boolean
  /** Write at this byte and truncate nothing (not with `append`): a chunk sent twice lands on the same bytes. */
  offset?: number
  /** Create missing parent directories (default true). */
  mkdirs?: boolean
}

/** File operations, done by the agent inside the sandbox (paths resolve inside it, always). */
export interface AgentFiles {
  /** Reads a regular file (or a range of it). */
  read (path: string, opts?: ReadOptions): Promise<Uint8Array>
  /** Creates or replaces a regular file. */
  write (path: string, data: Uint8Array, opts?: WriteOptions): Promise<void>
  /** Lists a directory; `truncated` when it had more than `AgentLimits.maxListEntries`. */
  list (path: string): Promise<{ entries: FileEntry[], truncated: boolean }>
  /** Describes a path; a symlink itself unless `follow`. */
  stat (path: string, opts?: { follow?: boolean }): Promise<FileStat>
  /** Removes a file, a symlink, an empty directory, or (recursive) a whole tree. */
  remove (path: string, opts?: { recursive?: boolean }): Promise<void>
  /** Makes a directory (`parents`: and the missing ones above; an existing directory is then success). */
  mkdir (path: string, opts?: { mode?: number, parents?: boolean }): Promise<void>
  /** Renames (atomically, within one file system). */
  rename (from: string, to: string): Promise<void>
  /** Makes `path` a symlink holding `target` as given (missing parents made unless `mkdirs` is false). */
  symlink (path: string, target: string, opts?: { mkdirs?: boolean }): Promise<void>
}
