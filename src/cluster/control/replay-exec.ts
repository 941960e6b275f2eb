/**
 * One recorded command run again in a sandbox: its argv, env, cwd, user, pseudo-terminal and
 * stdin as recorded; its output read to the end, counted and hashed as it comes (only a head is
 * kept); its end compared with the recorded one. A command that overruns its time is killed
 * and is a divergence (`timeout`).
 */
import { ErrorCodes, isWarrenError } from '../../errors.js'
import type { OutputPage, StdinAck, WireExecOptions } from '../sandbox/index.js'
import type { ExecStep } from '../trajectory/index.js'
import { EMPTY_SHA256, keptWhole, recordedOutcome, recordedPieces, StreamTally } from './replay-bytes.js'
import type { ReplayCompare } from './requests.js'
import { ReplayDefaults, type DivergenceReason, type StepOutcome, type StepTarget } from './replay-types.js'

/** What applying one step came to. */
export type Applied =
  | { kind: 'applied' }
  /** `fatal`: the sandbox is gone, nothing more can be applied. */
  | { kind: 'diverged', reason: DivergenceReason, message?: string, expected?: StepOutcome, actual?: StepOutcome, fatal?: boolean }
  /** Not replayable: the bytes it needs were not kept whole, or its end was never recorded. */
  | { kind: 'skipped' }
  /** Not re-applied by design (snapshot, pause, resume, egress). */
  | { kind: 'passed' }

/** Codes meaning the sandbox (or its node) is not there any more. */
const GONE = new Set<string>([ErrorCodes.SANDBOX_GONE, ErrorCodes.ACTOR_STOPPED, ErrorCodes.NO_SUCH_ACTOR, ErrorCodes.CONNECTION_CLOSED, ErrorCodes.PEER_UNRESPONSIVE])

/** True when `err` says the sandbox is gone. */
export function sandboxGone (err: unknown): boolean {
  return isWarrenError(err) && GONE.has(err.code)
}

/** A step that could not be applied, and why. */
export function failed (err: unknown): Applied {
  const message = err instanceof Error ? err.message : String(err)
  return { kind: 'diverged', reason: 'failed', message: isWarrenError(err) ? `${err.code}: ${message}` : message, fatal: sandboxGone(err) }
}

/** The time a command gets: its recorded duration times `stepTimeFactor`, at least `minStepMs`. */
export function stepTimeMs (step: ExecStep): number {
  return Math.max(ReplayDefaults.minStepMs, (step.durationMs ?? 0) * ReplayDefaults.stepTimeFactor)
}

/**
 * Runs a recorded command again and compares how it ended (`exit`: the exit code; `output`: that
 * and the sha256 of stdout and of stderr).
 * @param deadline when the whole replay's time is up
 */
export async function replayExec (t: StepTarget, step: ExecStep, compare: ReplayCompare, deadline: number): Promise<Applied> {
  // A command that never ended (still running, or lost with its node) has nothing to compare with.
  if (step.endedAt === undefined || step.exitCode === undefined || step.reason === 'lost') return { kind: 'skipped' }
  if (step.stdin !== undefined && !keptWhole(step.stdin)) return { kind: 'skipped' }
  const begun = Date.now()
  const until = Math.min(deadline, begun + stepTimeMs(step))
  let actual: StepOutcome | 'timeout'
  try {
    actual = await run(t, step, until)
  } catch (err) {
    // Refused for what it asked (a cwd that is not there): the recorded command was refused alike, with 126.
    if (!(isWarrenError(err) && typeof err.details?.field === 'string')) return failed(err)
    const empty = { bytes: 0, sha256: EMPTY_SHA256, head: new Uint8Array(0) }
    actual = { exitCode: 126, stdout: empty, stderr: empty }
  }
  const expected = async (): Promise<StepOutcome> => ({
    exitCode: step.exitCode,
    ...(step.reason !== undefined ? { reason: step.reason } : {}),
    stdout: await recordedOutcome(step.stdout, t.blob),
    stderr: await recordedOutcome(step.stderr, t.blob)
  })
  if (actual === 'timeout') {
    return { kind: 'diverged', reason: 'timeout', message: `the command ran past its ${Math.round((until - begun) / 1000)} s`, expected: await expected(), actual: { reason: 'timeout' } }
  }
  if (actual.exitCode !== step.exitCode) return { kind: 'diverged', reason: 'exit', expected: await expected(), actual }
  if (compare === 'output' && (actual.stdout?.sha256 !== (step.stdout?.sha256 ?? EMPTY_SHA256) || actual.stderr?.sha256 !== (step.stderr?.sha256 ?? EMPTY_SHA256))) {
    return { kind: 'diverged', reason: 'output', expected: await expected(), actual }
  }
  return { kind: 'applied' }
}

/** Starts the command, feeds it its stdin, and reads its output to the end (or until `until`: 'timeout'). */
async function run (t: StepTarget, step: ExecStep, until: number): Promise<StepOutcome | 'timeout'> {
  const { wait, margin } = { wait: ReplayDefaults.readWaitMs, margin: ReplayDefaults.marginMs }
  const fromBlob = step.stdin !== undefined && step.stdin.data === undefined
  const opts: WireExecOptions = {
    ...(step.env !== undefined ? { env: step.env } : {}),
    ...(step.cwd !== undefined ? { cwd: step.cwd } : {}),
    ...(step.user !== undefined ? { user: step.user } : {}),
    ...(step.pty !== undefined ? { pty: step.pty } : {}),
    // Bytes inline (at most 64 KiB) go up front; more are written as the command reads them.
    ...(step.stdin?.data !== undefined ? { stdin: step.stdin.data } : {}),
    ...(fromBlob ? { openStdin: true } : {}),
    // A command the recorded run timed out ends the same way.
    ...(step.reason === 'timeout' && step.durationMs !== undefined ? { timeoutMs: Math.max(1, step.durationMs) } : {})
  }
  const started = Date.now()
  // One the recorded run killed (exec-kill) is killed as long after its start.
  const killAt = step.reason === 'killed' && step.durationMs !== undefined ? started + step.durationMs : undefined
  const kill = async (): Promise<void> => { await t.send({ type: 'exec-kill', execId: step.execId }, margin).catch(() => {}) }
  let page = await t.send<OutputPage>({ type: 'exec', execId: step.execId, argv: step.argv, opts, ...(t.unrecorded ? { unrecorded: true } : {}) }, wait + margin)
  const writing = fromBlob ? writeStdin(t, step, until).catch((err: unknown) => err) : undefined
  const out = { stdout: new StreamTally(), stderr: new StreamTally() }
  let next = 0
  let killed = false
  try {
    for (;;) {
      for (const c of page.chunks) if (c.seq >= next) { out[c.stream].add(c.data); next = c.seq + 1 }
      if (page.result !== undefined) {
        const r = page.result
        return { exitCode: r.exitCode, ...(r.reason !== undefined ? { reason: r.reason } : {}), stdout: out.stdout.outcome(), stderr: out.stderr.outcome() }
      }
      const now = Date.now()
      if (killAt !== undefined && !killed && now >= killAt) { killed = true; await kill() }
      if (now >= until) { await kill(); return 'timeout' }
      const waitMs = Math.max(0, Math.min(wait, until - now, killAt !== undefined && !killed ? killAt - now : wait))
      page = await t.send<OutputPage>({ type: 'read', execId: step.execId, fromSeq: next, waitMs }, waitMs + margin)
    }
  } finally {
    await writing
  }
}

/** Writes a command's recorded stdin from the blob store, a piece at a time, then its end. */
async function writeStdin (t: StepTarget, step: ExecStep, until: number): Promise<void> {
  let offset = 0
  for await (const piece of recordedPieces(step.stdin!, t.blob, ReplayDefaults.stdinChunkBytes)) {
    for (;;) {
      try {
        const ack = await t.send<StdinAck>({ type: 'stdin', execId: step.execId, offset, data: piece }, ReplayDefaults.marginMs)
        if (ack.closed) return // the command stopped reading: the rest goes nowhere, as it did
        break
      } catch (err) {
        // The command has not read what it was given yet: its backpressure.
        if (!isWarrenError(err, ErrorCodes.OVERLOADED) || Date.now() >= until) throw err
        const after = typeof err.details?.retryAfterMs === 'number' ? err.details.retryAfterMs : 20
        await new Promise((resolve) => setTimeout(resolve, Math.min(after, 1000)))
      }
    }
    offset += piece.length
  }
  await t.send({ type: 'stdin', execId: step.execId, offset, eof: true }, ReplayDefaults.marginMs)
}
