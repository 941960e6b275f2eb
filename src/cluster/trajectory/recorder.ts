/**
 * A sandbox's trajectory recorder on its node: numbers its steps from 0 without gaps and writes
 * each to the sandbox's log as it happens. A step that takes time (a command, an upload) is
 * written when it starts and again, final, when it ends, with what it recorded; a final record
 * waits for its bytes to reach the blob store when they are too many to go inline.
 */
import { rmSync } from 'node:fs'
import type { EgressEvent, ExecResult, TerminalSize } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import { nameToWire, type WireName } from '../../file-names.js'
import { encodeValue } from './codec.js'
import type { NodeLog } from './node-log.js'
import { OutputJournal, type JournaledOutput, type OutputSeqs } from './output-journal.js'
import { BytesRecorder, type PushBlob, type RecordBudget } from './recorded-bytes.js'
import type { TrajectoryShipper } from './shipper.js'
import type { ExecStep, RecordedBytes, Step, StepBody, TrajectoryLimits } from './types.js'

/** What a running command adds to its step. */
export interface ExecRecording {
  /** A chunk of output; `seqs`: the output seqs it took (a resumable command's journal is cut by them). */
  output (stream: 'stdout' | 'stderr', chunk: Uint8Array, seqs?: OutputSeqs): void
  /** Bytes of stdin the command was given (up front, or as `stdin` messages). */
  stdin (bytes: Uint8Array): void
  end (result: ExecResult): void
}

/** How a command was asked to run, as its step records it. */
export interface ExecAsked {
  env?: Record<string, string>
  cwd?: string
  user?: string
  pty?: TerminalSize
  /** Given up front. */
  stdin?: Uint8Array
  /** It can outlive the node agent: its output is journaled on a durable log (output-journal.ts). */
  resumable?: boolean
}

export interface RecorderDeps {
  log: NodeLog
  shipper: TrajectoryShipper
  budget: RecordBudget
  push: PushBlob | undefined
  /** A fresh file path on the node for bytes beyond what goes inline. */
  spillPath: () => string
  /** Where a resumable command's output journal is kept, by its step's seq; undefined: no journals (the log is not durable). */
  journalPath?: (stepSeq: number) => string
  limits: TrajectoryLimits
  nextSeq: number
  /** Steps a previous agent began and never made final: final now (a command as `lost`). */
  unfinished?: Iterable<Step>
  /**
   * Exec ids of unfinished commands that outlived the agent: `resumeExec` goes on with their
   * steps; `unfinished`: any of them may have (known later: `settleResumable` ends the rest).
   */
  resumable?: ReadonlySet<string> | 'unfinished'
  /** How long a closing sandbox waits for its commands' ends, and for the control plane's acknowledgement. */
  closeWaitMs: number
  flushWaitMs: number
}

export class SandboxRecorder {
  private nextSeq: number
  /** The end record is written: nothing more goes in. */
  private ended = false
  private closing: Promise<void> | undefined
  private readonly pending = new Set<Promise<void>>()
  private egressSteps = 0
  /** Commands not ended yet, by seq: a closing sandbox ends those the backend did not. */
  private readonly running = new Map<number, { end: (result: ExecResult | undefined) => void, ended: Promise<void> }>()
  /** Steps of commands that outlived the agent, until `resumeExec` takes them (or `settleResumable`). */
  private readonly resumable = new Map<string, ExecStep>()

  constructor (private readonly d: RecorderDeps) {
    this.nextSeq = d.nextSeq
    for (const step of d.unfinished ?? []) {
      if (step.kind === 'exec' && (d.resumable === 'unfinished' || d.resumable?.has(step.execId) === true)) this.resumable.set(step.execId, step)
      else this.record(step.kind === 'exec' ? { ...step, endedAt: Date.now(), reason: 'lost' } : step, true)
    }
  }

  /**
   * Goes on with the step of a command that outlived the node agent (the sandbox took it up):
   * its output from now on is recorded, and `resumedAt` says so. Undefined when it has no step.
   */
  resumeExec (execId: string, fromSeq?: number): ExecRecording | undefined {
    const step = this.resumable.get(execId)
    if (step === undefined || this.ended) return undefined
    this.resumable.delete(execId)
    // What the old agent had recorded of its output below the consumer's seq, from its journal.
    const path = this.d.journalPath?.(step.seq)
    const found = path !== undefined && fromSeq !== undefined ? OutputJournal.reopen(path, fromSeq, this.d.limits.maxRecordedBytes) : undefined
    return this.follow({ ...step, resumedAt: Date.now() }, undefined, found)
  }

  /** Steps of commands that outlived the agent but were not taken up: final, as `lost`. */
  settleResumable (): void {
    for (const step of this.resumable.values()) {
      const path = this.d.journalPath?.(step.seq)
      if (path !== undefined) rmSync(path, { force: true })
      this.record({ ...step, endedAt: Date.now(), reason: 'lost' }, true)
    }
    this.resumable.clear()
  }

  /** The seq the next step gets. */
  get seq (): number { return this.nextSeq }

  /**
   * Refuses a new command or file change once the trajectory holds `maxTrajectoryBytes`: what it
   * would do could not be recorded. (Steps the sandbox makes by itself, egress, pause, are still
   * recorded: they are few and small.)
   * @throws WARREN_ERR_QUOTA naming `trajectory`
   */
  admitStep (): void {
    const max = this.d.limits.maxTrajectoryBytes
    if (this.d.log.bytes < max) return
    throw createError(ErrorCodes.QUOTA, `the sandbox's trajectory holds ${this.d.log.bytes} bytes, the most a sandbox records (${max}): fork or snapshot it to go on in a new sandbox`,
      { field: 'trajectory', limit: max })
  }

  /** Starts the step of a command; what it returns fills it in as the command runs. */
  exec (execId: string, argv: string[], asked: ExecAsked): ExecRecording {
    const begun: ExecStep = {
      seq: this.nextSeq, at: Date.now(), kind: 'exec', execId, argv,
      ...(asked.env !== undefined ? { env: asked.env } : {}),
      ...(asked.cwd !== undefined ? { cwd: asked.cwd } : {}),
      ...(asked.user !== undefined ? { user: asked.user } : {}),
      ...(asked.pty !== undefined ? { pty: { cols: asked.pty.cols, rows: asked.pty.rows } } : {})
    }
    if (!this.begin(begun)) return { output () {}, stdin () {}, end () {} }
    const path = asked.resumable === true ? this.d.journalPath?.(begun.seq) : undefined
    return this.follow(begun, asked.stdin, path !== undefined ? { journal: OutputJournal.create(path, this.d.limits.maxRecordedBytes), kept: undefined } : undefined)
  }

  /** Records a begun command's bytes as it runs, and its step final when it ends. */
  private follow (begun: ExecStep, upFront: Uint8Array | undefined, journaled?: { journal: OutputJournal, kept: JournaledOutput[] | undefined }): ExecRecording {
    const asked = { stdin: upFront }
    const streams = { stdin: this.bytes(), stdout: this.bytes(), stderr: this.bytes() }
    if (asked.stdin !== undefined) streams.stdin.write(asked.stdin)
    for (const k of journaled?.kept ?? []) streams[k.stream].write(k.data)
    const journal = journaled?.journal
    // The fields beside the bytes (argv, env) count towards a step's size too.
    const baseBytes = encodeValue(begun).length
    let done = false
    let resolveEnded!: () => void
    const ended = new Promise<void>((resolve) => { resolveEnded = resolve })
    const end = (result: ExecResult | undefined): void => {
      if (done) return
      done = true
      journal?.remove()
      this.running.delete(begun.seq)
      this.track((async () => {
        const inline = streams.stdin.bytes + streams.stdout.bytes + streams.stderr.bytes
        const toBlob = baseBytes + Math.min(inline, 3 * this.d.limits.inlineBytes) > this.d.limits.maxStepBytes
        const [stdin, stdout, stderr] = await Promise.all([streams.stdin, streams.stdout, streams.stderr].map((s) => s.finish(this.d.push, toBlob)))
        const endedAt = Date.now()
        this.record({
          ...begun, endedAt, stdout: stdout!, stderr: stderr!,
          ...(stdin!.bytes > 0 || asked.stdin !== undefined ? { stdin: stdin! } : {}),
          ...(result !== undefined
            ? { exitCode: result.exitCode, durationMs: result.durationMs, ...(result.reason !== undefined ? { reason: result.reason } : {}) }
            : { reason: 'killed', durationMs: endedAt - begun.at })
        }, true)
      })())
      resolveEnded()
    }
    this.running.set(begun.seq, { end, ended })
    return {
      output: (stream, chunk, seqs) => {
        if (done) return
        streams[stream].write(chunk)
        if (seqs !== undefined) journal?.write(seqs, stream, chunk)
      },
      stdin: (bytes) => { if (!done) streams.stdin.write(bytes) },
      end: (result) => end(result)
    }
  }

  /** A recorder of bytes under this sandbox's budget (an upload's content, before it is committed). */
  bytes (): BytesRecorder {
    return new BytesRecorder(this.d.budget, this.d.spillPath, this.d.limits)
  }

  /** A whole file was written (an upload committed): `content` is what it recorded. */
  write (path: string, mode: number | undefined, content: BytesRecorder): void {
    this.content({ kind: 'write', path: nameToWire(path), ...(mode !== undefined ? { mode } : {}) }, content)
  }

  /** A tar was unpacked at `path`: `content` recorded the tar's bytes. */
  upload (path: string, content: BytesRecorder): void {
    this.content({ kind: 'upload', path: nameToWire(path) }, content)
  }

  /** A path was removed (a tree, with `recursive`). */
  remove (path: string, recursive: boolean): void { this.instant({ kind: 'remove', path: nameToWire(path), ...(recursive ? { recursive } : {}) }) }
  /** A path was renamed. */
  rename (from: string, to: string): void { this.instant({ kind: 'rename', from: nameToWire(from), to: nameToWire(to) }) }
  /** A directory was made (and those above it, with `parents`). */
  mkdir (path: string, mode: number | undefined, parents: boolean): void {
    this.instant({ kind: 'mkdir', path: nameToWire(path), ...(mode !== undefined ? { mode } : {}), ...(parents ? { parents } : {}) })
  }

  /** A symlink was made (no file request makes one on its own today: a tar's are inside its `upload` step). */
  symlink (path: string, target: string): void { this.instant({ kind: 'symlink', path: nameToWire(path), target: nameToWire(target) }) }
  /** The sandbox was snapshotted: the snapshot's id and the layer it cut. */
  snapshot (snapshot: string, layer: string): void { this.instant({ kind: 'snapshot', snapshot, layer }) }
  /** The backend froze the sandbox. */
  pause (): void { this.instant({ kind: 'pause' }) }
  /** The backend thawed it. */
  resume (): void { this.instant({ kind: 'resume' }) }
  /** The sandbox's egress proxy was asked for a connection (at most `maxEgressSteps` are recorded). */
  egress (e: EgressEvent): void {
    if (this.egressSteps++ >= this.d.limits.maxEgressSteps) return
    this.instant({ kind: 'egress', host: e.host, port: e.port, allowed: e.allowed }, e.at)
  }

  /**
   * Resolves once every step recorded so far is final and acknowledged by the control plane
   * (a read of the trajectory then sees it all), or after `timeoutMs`.
   */
  async flush (timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    await Promise.race([Promise.allSettled([...this.pending]), sleep(timeoutMs)])
    await this.d.shipper.flush(this.d.log, Math.max(1, deadline - Date.now()))
  }

  /**
   * The sandbox ended: commands the backend has not ended yet get `closeWaitMs` to, then are
   * ended as killed; once every step is final, the end record goes, and the control plane's
   * acknowledgement is awaited (at most `flushWaitMs`, not at all while it is unreachable).
   */
  close (): Promise<void> {
    this.closing ??= (async () => {
      const running = [...this.running.values()]
      if (running.length > 0) await Promise.race([Promise.all(running.map((r) => r.ended)), sleep(this.d.closeWaitMs)])
      for (const r of this.running.values()) r.end(undefined)
      // Commands of a sandbox adopted paused that ended before it was resumed.
      this.settleResumable()
      while (this.pending.size > 0) await Promise.allSettled([...this.pending])
      this.d.log.append({ t: 'end', at: Date.now(), nextSeq: this.nextSeq })
      this.ended = true
      this.d.shipper.poke(this.d.log)
      await this.d.shipper.flush(this.d.log, this.d.flushWaitMs)
    })()
    return this.closing
  }

  /** A step with content: begun now, final once the content is (pushed when large). */
  private content (body: { kind: 'write', path: WireName, mode?: number } | { kind: 'upload', path: WireName }, content: BytesRecorder): void {
    const begun = { seq: this.nextSeq, at: Date.now(), ...body, content: { bytes: content.bytes, sha256: content.seal() } } as Step
    if (!this.begin(begun)) { content.discard(); return }
    this.track(content.finish(this.d.push).then((recorded: RecordedBytes) => this.record({ ...begun, content: recorded } as Step, true)))
  }

  private instant (body: StepBody, at = Date.now()): void {
    if (this.ended) return
    this.record({ seq: this.nextSeq++, at, ...body } as Step, true)
  }

  /** Numbers a step and writes its first record; false once the sandbox's trajectory has ended. */
  private begin (step: Step): boolean {
    if (this.ended) return false
    this.nextSeq++
    this.record(step, false)
    return true
  }

  private record (step: Step, final: boolean): void {
    if (this.ended) return
    this.d.log.append({ t: 'step', final, step: step.kind === 'exec' ? fitExec(step, this.d.limits.maxStepBytes) : step })
    this.d.shipper.poke(this.d.log)
  }

  private track (work: Promise<void>): void {
    const p = work.catch(() => {}).finally(() => this.pending.delete(p))
    this.pending.add(p)
  }
}

/**
 * A command's step as it can travel: one whose argv and env alone encode past `max` (they may
 * take up to the 1 MiB of the request that started it) has their strings cut to a share of it
 * each, so the step still fits a batch to the control plane and a page of a read. Such a
 * command is no longer replayable as it ran; anything less is recorded as given.
 */
export function fitExec (step: ExecStep, max: number): ExecStep {
  // A bound without encoding (a UTF-16 unit is at most 3 bytes of UTF-8): most steps are far within it.
  let rough = 4096
  for (const a of step.argv) rough += 3 * a.length + 8
  for (const [k, v] of Object.entries(step.env ?? {})) rough += 3 * (k.length + v.length) + 16
  for (const r of [step.stdin, step.stdout, step.stderr]) rough += (r?.data?.length ?? 0) + (r?.head?.length ?? 0) + (r?.tail?.length ?? 0)
  if (rough <= max || encodeValue(step).length <= max) return step
  const env = Object.entries(step.env ?? {})
  const each = Math.max(16, Math.floor(max / 2 / (step.argv.length + env.length)))
  const cut = (v: string): string => v.length > each ? v.slice(0, each) : v
  return { ...step, argv: step.argv.map(cut), ...(step.env !== undefined ? { env: Object.fromEntries(env.map(([k, v]) => [k.slice(0, 256), cut(v)])) } : {}) }
}

function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => { const t = setTimeout(resolve, ms); t.unref?.() })
}
