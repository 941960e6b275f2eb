/**
 * Trajectory: the record of what was run in a sandbox — every command, when, how it ended, and
 * the head of its output — so a trainer (or whoever looks at a rollout later) can read back what
 * an agent did. Numbered like output, read by `fromSeq`, and bounded twice: the head kept of each
 * stream, and the number of entries (the oldest go first, counted as `dropped`).
 */
import type { ExecResult } from '../../backends/types.js'
import type { StreamName } from './exec-output.js'

export const TrajectoryDefaults = {
  /** Entries kept per sandbox; beyond it the oldest are dropped. */
  maxEntries: 1000,
  /** Bytes of each stream kept per command (the rest is counted, not kept). */
  maxOutputBytes: 16 * 1024,
  /** Entries one read returns at most. */
  maxPage: 200
}

export interface TrajectoryEntry {
  seq: number
  execId: string
  argv: string[]
  startedAt: number
  endedAt?: number
  exitCode?: number
  reason?: ExecResult['reason']
  /** Bytes the command wrote, all of them. */
  stdoutBytes: number
  stderrBytes: number
  /** Their heads, UTF-8 (up to `maxOutputBytes` each). */
  stdout: string
  stderr: string
  /** Stdin bytes written while it ran (interactive commands). */
  stdinBytes: number
}

export interface TrajectoryPage {
  entries: TrajectoryEntry[]
  /** The seq to read from next. */
  nextSeq: number
  /** Entries dropped to stay within `maxEntries`, over the sandbox's life. */
  dropped: number
}

/** What a running command adds to its entry. */
export interface TrajectoryRecorder {
  output (stream: StreamName, data: Uint8Array): void
  stdin (bytes: number): void
  end (result: ExecResult): void
}

export class Trajectory {
  private readonly entries: TrajectoryEntry[] = []
  private nextSeq = 0
  private dropped = 0

  constructor (private readonly o = TrajectoryDefaults) {}

  /** Starts the entry of a command; what it returns fills it in as the command runs. */
  begin (execId: string, argv: string[]): TrajectoryRecorder {
    const entry: TrajectoryEntry = { seq: this.nextSeq++, execId, argv, startedAt: Date.now(), stdoutBytes: 0, stderrBytes: 0, stdout: '', stderr: '', stdinBytes: 0 }
    this.entries.push(entry)
    if (this.entries.length > this.o.maxEntries) { this.entries.shift(); this.dropped++ }
    const heads: Record<StreamName, Buffer[]> = { stdout: [], stderr: [] }
    const kept: Record<StreamName, number> = { stdout: 0, stderr: 0 }
    const limit = this.o.maxOutputBytes
    return {
      output (stream, data) {
        if (stream === 'stdout') entry.stdoutBytes += data.length
        else entry.stderrBytes += data.length
        const room = limit - kept[stream]
        if (room <= 0) return
        const part = Buffer.from(data.subarray(0, room))
        heads[stream].push(part)
        kept[stream] += part.length
        // Decoded as it grows, so a reader mid-command sees the head so far.
        entry[stream] = Buffer.concat(heads[stream]).toString('utf8')
      },
      stdin (bytes) { entry.stdinBytes += bytes },
      end (result) {
        entry.endedAt = Date.now()
        entry.exitCode = result.exitCode
        if (result.reason !== undefined) entry.reason = result.reason
      }
    }
  }

  /** Entries from `fromSeq` on (those already dropped are skipped), at most `limit`. */
  read (fromSeq = 0, limit = this.o.maxPage): TrajectoryPage {
    const first = this.entries.findIndex((e) => e.seq >= fromSeq)
    const entries = first < 0 ? [] : this.entries.slice(first, first + Math.max(1, Math.min(limit, this.o.maxPage)))
    const last = entries[entries.length - 1]
    return { entries: entries.map((e) => ({ ...e })), nextSeq: last === undefined ? Math.max(fromSeq, this.nextSeq) : last.seq + 1, dropped: this.dropped }
  }
}
