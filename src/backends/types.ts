/**
 * The one interface every sandbox backend answers (docs/design.md, "Sandboxes and backends"):
 * function, container, microvm and fullvm. A sandbox actor drives its backend only through
 * these calls, so the actor does not care which kind of isolation it got.
 *
 * Kept to what all four can honestly promise. Errors are `WarrenError`s with stable codes:
 * `WARREN_ERR_SANDBOX_GONE` for a killed or unknown sandbox, `WARREN_ERR_UNSUPPORTED` for an
 * operation a backend cannot do, `WARREN_ERR_BACKEND_UNAVAILABLE` when it cannot run work now.
 */
import { createError, ErrorCodes } from '../errors.js'

/** The four kinds of sandbox warren offers. */
export type BackendKind = 'function' | 'container' | 'microvm' | 'fullvm'

/** What a caller asks for when it creates a sandbox. Each backend uses the fields it can honour. */
export interface SandboxSpec {
  /** The cluster's id of the sandbox (hostname, journal key); backends make one up without it. */
  id?: string
  /** Environment every command in the sandbox starts with; `ExecOptions.env` is laid over it. */
  env?: Record<string, string>
  /** Whose sandbox it is (the cluster's tenant), for backends that share resources fairly. */
  tenant?: string
  /** Resource limits (container and VM backends). */
  limits?: { cpus: number, memoryMiB: number, diskMiB: number, pids: number }
  /** Layer stack, bottom first (container and VM backends): EROFS image digests or names. */
  layers?: string[]
  /** Hosts the sandbox may reach through its egress proxy (container backend); none: no way out. */
  egress?: string[]
  /** The hostname inside (backends with `snapshots`); default the sandbox's id. */
  hostname?: string
  /**
   * Start from a memory snapshot (backends with `memorySnapshots`): the saved state's digest and
   * the machine it was saved from, on the same `layers`; its processes run on. Others refuse it
   * (UNSUPPORTED naming `memory`).
   */
  memory?: MemoryState
  /**
   * Opaque data the backend keeps with a durable sandbox and hands back from `adopt` after a
   * node restart (the node stores the tenant and spec there).
   */
  meta?: unknown
}

/** A sandbox that outlived its node agent, found again by `adopt`. */
export interface AdoptedSandbox {
  handle: SandboxHandle
  /** What was passed as `spec.meta` when it was created. */
  meta: unknown
  /** True when it was paused (frozen) and still is. */
  paused?: boolean
  /** Its resumable commands (`ExecOptions.resume`) that outlived the old agent: `Backend.reattach` takes them up. */
  execs?: AdoptedExec[]
}

/** A resumable command found again after a node restart. */
export interface AdoptedExec {
  /** `ExecOptions.resume.tag` it was started with. */
  tag: string
  /** Output chunks below this were acknowledged; the ones from here on are still kept. */
  fromSeq: number
  /** True when it has ended (its exit waits to be read). */
  ended: boolean
}

/** One connection a sandbox's egress proxy was asked for, and whether the allow-list let it through. */
export interface EgressEvent {
  host: string
  port: number
  allowed: boolean
  /** When it was asked for (ms since the epoch). */
  at: number
}

/** A memory snapshot: the saved machine state and what a sandbox restored from it must be. */
export interface MemoryState extends SavedMachine {
  /** `sha256:<hex>` of the state file (a `snapshot` blob). */
  state: string
}

/**
 * The machine a memory snapshot was saved from, which the VM restored from it must be: its
 * vCPUs and MiB, and `machine`, the accelerator, CPU model and QEMU release
 * (`tcg:max:qemu-7.2`): a state saved under one does not load under another. Absent in
 * snapshots from before it was recorded.
 */
export interface SavedMachine {
  vcpus: number
  memoryMiB: number
  machine?: string
}

/** A sandbox's file system cut into a read-only layer (`Backend.snapshot`). */
export interface SnapshotLayer {
  /** `sha256:<hex>` of the image file. */
  digest: string
  /** The image file, in the backend's layer store (so this node can stack it at once). */
  path: string
  bytes: number
  /**
   * Present for a memory snapshot: the file is then not a layer but the VM's saved state (its
   * RAM, its writable layer inside it, devices, vCPUs), restored on the sandbox's own layers
   * by a guest of this many vCPUs and MiB.
   */
  memory?: SavedMachine
}

/** A created sandbox, as its backend hands it out. Opaque apart from these fields. */
export interface SandboxHandle {
  /** Unique among the backend's live sandboxes. */
  readonly id: string
  /** The backend that made it; a handle only works with that backend. */
  readonly kind: BackendKind
  /** True when `create` handed out a sandbox made ahead of time (a warm pool's), not one made for it. */
  readonly warm?: boolean
}

/** How one command runs. Every field is optional; backends document their defaults. */
export interface ExecOptions {
  /**
   * The command's standard input: bytes given up front, or (backends with `interactiveStdin`)
   * chunks as they come, EOF when the iterable ends.
   */
  stdin?: Uint8Array | AsyncIterable<Uint8Array>
  /** Variables laid over the sandbox's environment for this command only. */
  env?: Record<string, string>
  /** Working directory inside the sandbox (backends with `commandIdentity`); default `/`. */
  cwd?: string
  /**
   * Who the command runs as (backends with `commandIdentity`): a name from the sandbox's
   * /etc/passwd, or a numeric `uid` or `uid:gid`. Default root.
   */
  user?: string
  /**
   * Runs the command on a pseudo-terminal of this size (backends with `terminal`): its stdin,
   * stdout and stderr are the terminal, so all output arrives as stdout.
   */
  pty?: ExecTerminal
  /** Wall-clock limit; when it passes the command is cut with exit code 124, reason 'timeout'. */
  timeoutMs?: number
  /** Cap on stdout + stderr bytes together; the rest is dropped and the result says `truncated`. */
  maxOutputBytes?: number
  /**
   * Receives standard output as it is written, in order, before `exec` resolves. A callback that
   * throws cuts the command and `exec` rejects with what it threw.
   */
  onStdout?: (chunk: Uint8Array) => void
  /** Receives standard error the same way as `onStdout`; order between the two is kept. */
  onStderr?: (chunk: Uint8Array) => void
  /** Aborting it cuts the command: exit code 137, reason 'killed'. */
  signal?: AbortSignal
  /**
   * Flow control of the output (backends with `outputCredit`): no more than the credit is
   * passed to `onStdout`/`onStderr`, and the command blocks on write while there is none.
   */
  credit?: OutputCredit
  /**
   * Resumable (backends with `resumableExecs`): the command outlives the node agent, its output
   * kept in the sandbox until acknowledged; after a restart `adopt` lists it under `tag` and
   * `reattach` takes it up. Output chunks are numbered from 0, one per callback.
   */
  resume?: ExecResume
}

/** How a resumable command's consumer says which output it has for good. */
export interface ExecResume {
  /** The node's name for it (its exec id), at most 64 bytes. */
  readonly tag: string
  /**
   * Registers how the backend hears of acknowledgements: `ack(seq)` when the chunks below seq
   * are had for good; a seq past the last chunk after the end releases the command's record.
   */
  onAck (ack: (seq: number) => void): void
}

/**
 * Output credit, held by the consumer of a command's output: the backend may deliver
 * `windowBytes`, then as much more as the consumer grants as it frees what it holds.
 */
export interface OutputCredit {
  /** Bytes the backend may deliver before the first grant. */
  readonly windowBytes: number
  /** Registers how the backend hears of grants: `grant(n)` each time n more bytes may come. */
  onGrant (grant: (bytes: number) => void): void
}

/** A terminal's size in character cells. */
export interface TerminalSize { cols: number, rows: number }

/** The pseudo-terminal of a command: its first size, and how the backend hears of a new one. */
export interface ExecTerminal extends TerminalSize {
  /** Registers how the backend hears of resizes: `resize(size)` each time the terminal changes size. */
  onResize (resize: (size: TerminalSize) => void): void
}

/** Why a command ended other than by finishing on its own. */
export type ExecEndReason = 'timeout' | 'killed' | 'crashed' | 'oom'

/** Told why a sandbox ended by itself; `reason` `oom` when the kernel killed it for memory. */
export type GoneListener = (message: string, reason?: 'oom') => void

/** How a command ended. */
export interface ExecResult {
  /** 0–255, as from a process; see each backend for the codes it reserves. */
  exitCode: number
  /** Time from `exec` being called to the command ending. */
  durationMs: number
  /** True when output beyond `maxOutputBytes` was dropped. */
  truncated: boolean
  /** Set when the command did not end on its own. */
  reason?: ExecEndReason
  /** A human explanation that goes with `reason` (e.g. the crash message). */
  message?: string
}

/** The type of a file system entry. */
export type FileType = 'file' | 'dir' | 'symlink' | 'other'

/** One entry of a directory listing. */
export interface FileEntry {
  name: string
  type: FileType
  size: number
  /** Permission bits (07777). */
  mode: number
  mtimeMs: number
}

/** What stat says about one path. */
export interface FileStat {
  type: FileType
  size: number
  mode: number
  uid: number
  gid: number
  mtimeMs: number
  /** A symlink's target, as stored (only when `type` is 'symlink'). */
  target?: string
}

/**
 * File access inside a sandbox; every path resolves inside the sandbox, never outside it. A
 * read or write moves at most one chunk (the backend's `maxChunkBytes`): large files go as many
 * ranged calls, so nobody holds a whole file. Backends without a file system reject every call
 * with WARREN_ERR_UNSUPPORTED.
 */
export interface SandboxFiles {
  /** The most bytes one `read` returns or one `write` takes. */
  readonly maxChunkBytes: number
  /** Reads `length` bytes from `offset` of a regular file (fewer at its end). */
  read (handle: SandboxHandle, path: string, range: { offset: number, length: number }): Promise<Uint8Array>
  /** Replaces a regular file (making its parents), or with `offset` writes there and truncates nothing. */
  write (handle: SandboxHandle, path: string, data: Uint8Array, opts?: { offset?: number, mode?: number }): Promise<void>
  /** Lists a directory; `truncated` when it held more entries than one listing returns. */
  list (handle: SandboxHandle, path: string): Promise<{ entries: FileEntry[], truncated: boolean }>
  /** Describes a path; a symlink itself unless `follow`. */
  stat (handle: SandboxHandle, path: string, opts?: { follow?: boolean }): Promise<FileStat>
  /** Makes a directory; with `parents` the missing ones above too, and an existing one is success. */
  mkdir (handle: SandboxHandle, path: string, opts?: { mode?: number, parents?: boolean }): Promise<void>
  /** Removes a file, a symlink, an empty directory, or (recursive) a whole tree (never following links). */
  remove (handle: SandboxHandle, path: string, opts?: { recursive?: boolean }): Promise<void>
  /** Renames, atomically within one file system. */
  rename (handle: SandboxHandle, from: string, to: string): Promise<void>
  /** Makes `path` a symlink holding `target` as given. */
  symlink (handle: SandboxHandle, path: string, target: string): Promise<void>
}

/** A backend: makes sandboxes of one kind and runs commands in them. */
export interface Backend {
  /** Which kind of sandbox this backend makes. */
  readonly kind: BackendKind
  /** True when `exec` takes stdin as an async iterable (written while the command runs). */
  readonly interactiveStdin?: boolean
  /** True when `exec` honours `ExecOptions.credit` (output waits for credit instead of piling up). */
  readonly outputCredit?: boolean
  /** True when `exec` honours `ExecOptions.cwd` and `ExecOptions.user`. */
  readonly commandIdentity?: boolean
  /** True when `exec` honours `ExecOptions.pty` (a pseudo-terminal, resizable). */
  readonly terminal?: boolean
  /** Longest `timeoutMs` a command may ask for, when the backend bounds it; more is INVALID_ARGUMENT. */
  readonly maxTimeoutMs?: number
  /** True when `pause`, `resume` and `snapshot` work. */
  readonly snapshots?: boolean
  /** True when `snapshot` takes `memory` and `create` takes `spec.memory` (processes kept). */
  readonly memorySnapshots?: boolean
  /** Makes a ready sandbox. */
  create (spec?: SandboxSpec): Promise<SandboxHandle>
  /**
   * Backends whose sandboxes outlive the node agent (containers, VMs): finds the ones still
   * alive after a restart and reclaims the leftovers of the rest. Called once, before `create`.
   */
  adopt? (): Promise<AdoptedSandbox[]>
  /** True when `exec` honours `ExecOptions.resume` and `reattach` is there. */
  readonly resumableExecs?: boolean
  /**
   * Takes up a resumable command that outlived the old node agent (`AdoptedSandbox.execs`): its
   * kept output from `opts.fromSeq` on, then the rest, through the handlers of `opts`; resolves
   * as `exec` does. Rejects with WARREN_ERR_NOT_FOUND when it is gone.
   */
  reattach? (handle: SandboxHandle, tag: string, opts: ExecOptions & { fromSeq: number }): Promise<ExecResult>
  /** Layer digests cached on this node (backends with layers), so placement can prefer it. */
  cachedLayers? (): string[]
  /**
   * Runs one command to its end, streaming its output through the callbacks in `opts`.
   * Resolves with how it ended (a non-zero exit is a result, not an error); rejects only when
   * the command could not be run at all.
   */
  exec (handle: SandboxHandle, argv: readonly string[], opts?: ExecOptions): Promise<ExecResult>
  /** File operations; see `SandboxFiles`. */
  readonly files: SandboxFiles
  /** Ends the sandbox and every command running in it (reason 'killed'). Idempotent. */
  kill (handle: SandboxHandle): Promise<void>
  /**
   * Backends whose sandboxes can end by themselves (their init dies, their layers are lost):
   * calls `listener` once with why (and `oom` when the kernel killed it for memory), and the
   * caller ends the sandbox. Returns the unsubscribe.
   */
  onGone? (handle: SandboxHandle, listener: GoneListener): () => void
  /**
   * Freezes every process of the sandbox, its agent included (cgroup freezer); memory is kept,
   * and a kill still ends it. Idempotent.
   */
  pause? (handle: SandboxHandle): Promise<void>
  /**
   * Thaws a paused sandbox. Idempotent.
   * @returns for a sandbox adopted paused (`AdoptedSandbox.paused`), on its first resume: its
   *   resumable commands, which its frozen agent could not list at adopt (`reattach` takes them up)
   */
  resume? (handle: SandboxHandle): Promise<AdoptedExec[] | undefined>
  /**
   * Cuts the sandbox's writable layer into a read-only EROFS layer, in the backend's layer
   * store: its processes are frozen while it is cut (so it is consistent) and thawed after,
   * unless the sandbox was paused. With `flatten`, the whole file system the sandbox sees (its
   * layers and its writes) becomes one layer that stands alone. With `memory` (backends with
   * `memorySnapshots`), the sandbox's whole state instead, its processes' memory included
   * (`SnapshotLayer.memory`); `flatten` is then moot.
   */
  snapshot? (handle: SandboxHandle, opts?: { flatten?: boolean, memory?: boolean }): Promise<SnapshotLayer>
  /**
   * Backends with egress: calls `listener` for each connection the sandbox's proxy is asked
   * for. Returns the unsubscribe.
   */
  onEgress? (handle: SandboxHandle, listener: (event: EgressEvent) => void): () => void
  /** Kills every sandbox and releases the backend's resources. Later calls reject. */
  close (): Promise<void>
}

/**
 * Refuses a command's `timeoutMs` beyond what the backend allows: the one check, used by the
 * sandbox actor before a command starts and by a backend used on its own.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `timeoutMs`
 */
export function checkTimeoutBound (timeoutMs: unknown, maxTimeoutMs: number | undefined): void {
  if (maxTimeoutMs !== undefined && typeof timeoutMs === 'number' && timeoutMs > maxTimeoutMs) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `timeoutMs must be at most ${maxTimeoutMs} ms`, { field: 'timeoutMs', maxTimeoutMs })
  }
}
