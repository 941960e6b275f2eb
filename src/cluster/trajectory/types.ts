/**
 * The trajectory of a sandbox as it crosses the wire (docs/protocol.md, "Trajectories"): a
 * header, then numbered steps — every command, file change, egress connection, snapshot,
 * pause and resume — recorded on the node as they happen and kept by the control plane after
 * the sandbox is gone. The shapes here are the contract; the node's log and the control plane's
 * store both carry them as msgpack.
 */
import type { WireName } from '../../file-names.js'
import type { SandboxSpec } from '../spec.js'

const KiB = 1024
const MiB = 1024 * KiB

/** What a trajectory keeps and how it is read; one object so an operator (or a test) sees every knob. */
export const TrajectoryDefaults = {
  /** Bytes a sandbox's steps keep whole (outputs, stdin, file contents); beyond it, head and tail only. */
  maxRecordedBytes: 64 * MiB,
  /** Bytes kept inline in a step; more go to the blob store (read with `trajectory-blob`). */
  inlineBytes: 64 * KiB,
  /** What is kept of bytes not kept whole: the first and the last this many. */
  headBytes: 32 * KiB,
  tailBytes: 32 * KiB,
  /** How long the control plane keeps a trajectory after its sandbox ended. */
  retentionMs: 7 * 24 * 3_600_000,
  /** How often the control plane looks for trajectories past their retention (sooner when the retention is short). */
  sweepEveryMs: 60_000,
  /** Steps one read returns at most (and by default). */
  maxPage: 200,
  /** Bytes of steps one read returns at most (at least one step, whatever its size). */
  maxPageBytes: 768 * KiB,
  /** Bytes one `trajectory-blob` read returns at most. */
  maxBlobReadBytes: 960 * KiB,
  /** Egress steps a sandbox records at most (a process connecting in a loop must not fill the store). */
  maxEgressSteps: 10_000,
  /** A step encoded larger than this has its inline bytes moved to the blob store, so it fits a page. */
  maxStepBytes: 640 * KiB,
  /**
   * Bytes of records one sandbox's trajectory log may hold (what the node keeps and ships, and the
   * store keeps, besides the blobs `maxRecordedBytes` bounds). Past it, new commands and file
   * changes of the sandbox are refused (WARREN_ERR_QUOTA naming `trajectory`) rather than done
   * unrecorded: every step a trajectory has is still all the sandbox did. A fork or a snapshot
   * starts a new sandbox with a trajectory of its own.
   */
  maxTrajectoryBytes: 1024 * MiB
}

/** The bounds in force (a node or a test may set them; the rest from `TrajectoryDefaults`). */
export type TrajectoryLimits = typeof TrajectoryDefaults

/** Bytes recorded: whole when the sandbox's record budget allows, else head and tail. */
export interface RecordedBytes {
  bytes: number
  /** Hex, of all the bytes. */
  sha256: string
  /** All of them, inline (at most `inlineBytes`). */
  data?: Uint8Array
  /** All of them, in the blob store (`sha256:<hex>`; read with `trajectory-blob`). */
  blob?: string
  /** When not kept whole: the first `headBytes` and the last `tailBytes` (after the head). */
  head?: Uint8Array
  tail?: Uint8Array
}

export interface TrajectoryHeader {
  sandboxId: string
  tenant: string
  node: string
  createdAt: number
  /** As resolved (digests, not names). */
  spec: SandboxSpec
  /** The layer stack, bottom first. */
  layers: string[]
  /** The snapshot it was created from. */
  snapshot?: string
}

/** What a step says, by kind. */
export type StepBody =
  | {
    kind: 'exec', execId: string, argv: string[], env?: Record<string, string>, cwd?: string, user?: string,
    pty?: { cols: number, rows: number }, stdin?: RecordedBytes,
    /** Set once the command has ended, with the rest below. */
    endedAt?: number, exitCode?: number, reason?: string, durationMs?: number, stdout?: RecordedBytes, stderr?: RecordedBytes
    /**
     * The node agent restarted while the command ran and took it up again (it outlived the
     * agent): stdout and stderr hold what it wrote from the first chunk the client had not
     * acknowledged then (the client got all of it).
     */
    resumedAt?: number
  }
  /**
   * A whole-file write, or a committed upload of one file. Paths are kept as they cross the
   * wire: a str, or the bytes of a name that is not UTF-8 (see file-names.ts).
   */
  | { kind: 'write', path: WireName, mode?: number, content: RecordedBytes }
  /** A tar tree unpacked at `path`. */
  | { kind: 'upload', path: WireName, content: RecordedBytes }
  | { kind: 'remove', path: WireName, recursive?: boolean }
  | { kind: 'rename', from: WireName, to: WireName }
  | { kind: 'mkdir', path: WireName, mode?: number, parents?: boolean }
  | { kind: 'symlink', path: WireName, target: WireName }
  | { kind: 'snapshot', snapshot: string, layer: string }
  | { kind: 'pause' }
  | { kind: 'resume' }
  | { kind: 'egress', host: string, port: number, allowed: boolean }

/** One step: numbered from 0 without gaps, `at` when it happened (ms since the epoch). */
export type Step = { seq: number, at: number } & StepBody

export type StepKind = StepBody['kind']
export type ExecStep = Extract<Step, { kind: 'exec' }>

export interface TrajectoryPage {
  /** When the read started at seq 0. */
  header?: TrajectoryHeader
  steps: Step[]
  /** The seq to read from next. */
  nextSeq: number
  /** True once the sandbox has ended and every step it recorded has reached the store. */
  complete: boolean
}

/**
 * One record of a node's trajectory log (and of a batch shipped to the control plane). An exec
 * step is written when it starts (`final` false) and again when it ends; the later one wins.
 */
export type LogRecord =
  | { t: 'header', header: TrajectoryHeader }
  | { t: 'step', final: boolean, step: Step }
  /** The sandbox ended and every step before `nextSeq` is final. */
  | { t: 'end', at: number, nextSeq: number }
  /** The sandbox was made again under its id (resume of a hibernated one, restore): steps go on from `nextSeq`. */
  | { t: 'continue', at: number, nextSeq: number }

/** What a node ships: the records of some of its logs, each run numbered from `first` (its place in that log). */
export interface ShipBatch {
  type: 'append'
  nodeId: string
  logs: Array<{ sandboxId: string, first: number, records: Uint8Array[] }>
}

/** The control plane's answer: every record of each log up to `upTo` is stored. */
export interface ShipAck { acks: Array<{ sandboxId: string, upTo: number }> }

/** The RecordedBytes a step holds (to find the blobs it references). */
export function recordedOf (step: StepBody): RecordedBytes[] {
  switch (step.kind) {
    case 'exec': return [step.stdin, step.stdout, step.stderr].filter((r): r is RecordedBytes => r !== undefined)
    case 'write':
    case 'upload': return [step.content]
    default: return []
  }
}
