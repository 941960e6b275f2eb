/**
 * Replay and restore as they cross the wire (docs/protocol.md, "Replay and restore"): what one
 * replayed command gave beside what its step recorded, and the answers of `replay` and
 * `restore`; the bounds both keep to; and how a step reaches the sandbox it is applied to.
 */
import type { SandboxMessage } from '../sandbox/index.js'
import type { SandboxView } from './views.js'

const KiB = 1024

/** The bounds of a replay or restore; one object so an operator (or a test) sees every knob. */
export const ReplayDefaults = {
  /** The longest a whole replay (or restore) may take; a step still running then is a divergence (`timeout`). */
  maxMs: 30 * 60_000,
  /** A command gets its recorded duration times this… */
  stepTimeFactor: 4,
  /** …and at least this long (a file step gets this). */
  minStepMs: 60_000,
  /** What a result shows of each output: its first bytes. */
  headBytes: 4 * KiB,
  /** How long one read of a replayed command's output waits for more. */
  readWaitMs: 2000,
  /** What a message to the sandbox gets beyond the time it asks to wait. */
  marginMs: 5000,
  /** Bytes one stdin message carries (the sandbox holds 1 MiB unread per command). */
  stdinChunkBytes: 256 * KiB,
  /** How long the fresh sandbox may wait for capacity. */
  placementDeadlineMs: 30_000,
  /** Seqs a result lists as skipped at most (the first ones): a reply stays far within a frame. */
  maxSkippedListed: 10_000
}

/** One output of a command: its count, sha256 (hex) and first bytes (at most `headBytes`). */
export interface StreamOutcome { bytes: number, sha256: string, head: Uint8Array }

/** How a command ended: as recorded (`expected`) or as replayed (`actual`). */
export interface StepOutcome {
  exitCode?: number
  /** The recorded end's reason (`timeout`, `killed`, `oom`…), or `timeout` for a replayed step that overran its time. */
  reason?: string
  stdout?: StreamOutcome
  stderr?: StreamOutcome
}

/**
 * Why a replayed step diverged: `exit` (another exit code), `output` (the same exit code, other
 * bytes), `timeout` (it overran its time, or the replay's), `failed` (it could not be applied:
 * a file operation refused, the sandbox gone; `message` says why).
 */
export type DivergenceReason = 'exit' | 'output' | 'timeout' | 'failed'

/** What the steps of a replay or restore came to. */
export interface RunResult {
  /** Steps applied. */
  steps: number
  /** The seq of the first step that diverged. */
  divergedAt: number | null
  reason?: DivergenceReason
  message?: string
  expected?: StepOutcome
  actual?: StepOutcome
  /** Seqs not replayable: content not kept whole (head and tail only), or a command whose end was not recorded. */
  skipped: number[]
}

/** The answer to `replay`. */
export interface ReplayResult extends RunResult {
  /** The fresh sandbox the steps were applied to (it is kept; its trajectory is its own). */
  sandbox: SandboxView
}

/** The answer to `restore`. */
export interface RestoreResult {
  /** The sandbox, under its id again, ready. */
  sandbox: SandboxView
  /** The snapshot it was made from, or null (from its trajectory's header, every step replayed). */
  snapshot: string | null
  /** Steps applied after the snapshot's. */
  replayed: number
  /** True when every replayed command gave what it had (exit code and outputs). */
  matched: boolean
  divergedAt: number | null
  reason?: DivergenceReason
  message?: string
  expected?: StepOutcome
  actual?: StepOutcome
  skipped: number[]
}

/** The sandbox steps are applied to, and where their recorded bytes come from. */
export interface StepTarget {
  /** A message to the sandbox's actor. */
  send: <R>(message: SandboxMessage, timeoutMs: number) => Promise<R>
  /** Bytes `[offset, offset + length)` of a record blob the source trajectory references. */
  blob: (digest: string, offset: number, length: number) => Promise<Uint8Array>
  /** True for a restore: the sandbox's trajectory already holds these steps. */
  unrecorded: boolean
}
