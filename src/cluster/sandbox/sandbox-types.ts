/**
 * What a sandbox actor is told and tells: its states and end reasons, the messages it takes, the
 * info and events it reports, its defaults and its start arguments (sandbox.ts is the actor).
 */
import type { AdoptedExec, Backend, SandboxHandle, TerminalSize } from '../../backends/types.js'
import type { BlobKind } from '../../images/index.js'
import type { ExecMeter } from '../metrics/index.js'
import type { SandboxSpec } from '../spec.js'
import type { SandboxRecorder } from '../trajectory/index.js'
import type { AheadBudget } from './file-budget.js'
import type { FileRequest, FilesLimits } from './file-requests.js'
import type { OutputPool } from './output-pool.js'

export type SandboxState = 'creating' | 'ready' | 'paused' | 'stopping' | 'gone' | 'failed'

/** Why a sandbox ended. */
export type EndReason = 'killed' | 'ttl' | 'idle' | 'failed' | 'node-shutdown' | 'lost' | 'oom'

export interface SandboxInfo {
  id: string
  tenant: string
  state: SandboxState
  backend: SandboxSpec['backend']
  labels: Record<string, string>
  createdAt: number
  expiresAt: number
  reason?: EndReason
  message?: string
  /** Pauses and resumes so far (PauseControl.seq): which of two reports of them is newer. */
  pauseSeq?: number
  /** True when its backend handed out a sandbox made ahead (a warm pool's). */
  warm?: boolean
}

/** What a sandbox tells its node (and through it the control plane) when its state changes. */
export interface SandboxEvent {
  id: string
  tenant: string
  state: SandboxState
  reason?: EndReason
  message?: string
  /** When its backend could not make it: the backend's error code (`WARREN_ERR_*`), beside `message`. */
  code?: string
  /** And the spec field that error names (`limits.memoryMiB`), if it names one. */
  field?: string
  /** On a pause (`paused`) or a resume (`ready`): the change's number, and when the sandbox now ends. */
  pauseSeq?: number
  expiresAt?: number
}

/** Exec options as they cross the wire (no callbacks: output is pulled). */
export interface WireExecOptions {
  stdin?: Uint8Array
  /** Keep stdin open for `stdin` messages (instead of bytes given up front). */
  openStdin?: boolean
  env?: Record<string, string>
  /** Working directory inside the sandbox (container sandboxes). */
  cwd?: string
  /** A name from the sandbox's /etc/passwd, or `uid` / `uid:gid` (container sandboxes). */
  user?: string
  /** Run on a pseudo-terminal of this size (container sandboxes); resized with `exec-resize`. */
  pty?: TerminalSize
  timeoutMs?: number
  maxOutputBytes?: number
}

/**
 * `unrecorded` (on exec and files): the control plane re-applies a step its trajectory already
 * holds (a restore), so the change is made but not recorded again. Only the control plane sets
 * it: the session's request parsers build these messages afresh, and no client field maps to it.
 */
export type SandboxMessage =
  | { type: 'exec', execId: string, argv: string[], opts?: WireExecOptions, unrecorded?: boolean }
  | { type: 'read', execId: string, fromSeq: number, maxBytes?: number, waitMs?: number }
  | { type: 'exec-kill', execId: string }
  /** A new size for the pseudo-terminal of a command started with `pty`. */
  | { type: 'exec-resize', execId: string, cols: number, rows: number }
  | { type: 'stdin', execId: string, offset: number, data?: Uint8Array, eof?: boolean }
  /** Answers once every step recorded so far has reached the control plane's store (bounded: a read of the trajectory follows). */
  | { type: 'trajectory-flush' }
  | { type: 'info' }
  | { type: 'kill', reason?: EndReason }
  /** Ends the sandbox `ttlMs` from now instead (its whole life within `SpecDefaults.maxTtlMs`); answers with its info. */
  | { type: 'set-ttl', ttlMs: number }
  /** A file operation (file-requests.ts): answered later, never holding up other messages. */
  | { type: 'files', req: FileRequest, unrecorded?: boolean }
  | { type: 'expire', reason: 'ttl' | 'idle' }
  | { type: 'sweep' }
  /** The backend says the sandbox ended by itself (its init died, its layers were lost). */
  | { type: 'backend-gone', message: string, reason?: 'oom' }
  /** Freezes the sandbox (pause.ts); answers with its info once frozen. */
  | { type: 'pause' }
  /** Thaws it; answers with its info (a new `expiresAt` when paused time does not count). */
  | { type: 'resume' }
  /** Cuts its file system into a layer and pushes it (snapshot.ts); answers with a SnapshotResult. `snapshot`: the id it is made for, for the trajectory's step. */
  | { type: 'snapshot', flatten?: boolean, snapshot?: string, memory?: boolean }

export const SandboxDefaults = {
  maxConcurrentExecs: 64,
  /** Finished outputs nobody pulls are dropped after this long. */
  outputRetentionMs: 5 * 60_000,
  /** Largest page one `read` returns: under the transport's 1 MiB frame, with room for the envelope. */
  maxPageBytes: 1024 * 1024 - 64 * 1024,
  /** Longest a `read` waits for output before answering with an empty page. */
  maxReadWaitMs: 2000,
  maxExecIdLength: 64,
  /**
   * Ids of commands that ran to their end and were read, remembered (the newest this many) so a
   * start sent again with one (a retry that waited queued behind the first) is refused rather
   * than run a second time.
   */
  finishedExecIds: 256
}

export interface SandboxArgs {
  id: string
  tenant: string
  spec: SandboxSpec
  backend: Backend
  report: (event: SandboxEvent) => void
  /** Set when the sandbox outlived a node restart: drive this handle instead of creating one. */
  adopted?: { handle: SandboxHandle, createdAt: number, paused?: boolean, execs?: AdoptedExec[] }
  /** The node's output buffer space, shared by all its sandboxes (without it, one of this sandbox's own). */
  output?: OutputPool
  /** Bounds of file transfers (the rest from `FilesDefaults`). */
  files?: Partial<FilesLimits>
  /** The node's memory for upload chunks held ahead of gaps, shared by all its sandboxes (without it, one of this sandbox's own). */
  fileBudget?: AheadBudget
  /** Puts a file into the control plane's blob store (snapshot layers, trajectory records); without it the sandbox cannot snapshot. */
  pushBlob?: (file: string, kind: BlobKind) => Promise<{ digest: string, bytes: number }>
  /** Where its steps are recorded (src/cluster/trajectory); snapshot, pause and resume record theirs through it too. */
  trajectory: SandboxRecorder
  /** The node's counters of commands (started, output bytes, durations). */
  meter?: ExecMeter
}

/** What a durable backend keeps for the node, to rebuild the sandbox actor after a restart. */
export interface SandboxMeta { id: string, tenant: string, spec: SandboxSpec, createdAt: number }
