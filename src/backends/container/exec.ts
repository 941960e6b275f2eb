/**
 * One command of a sandbox whose PID 1 is warren-init (a container, or a microVM's guest), as
 * the Backend interface puts it (`ExecOptions`), run through its agent: the user resolved from
 * the sandbox's /etc/passwd, the environment laid over the sandbox's, credit and resizes passed
 * on, and the agent's result read back as an `ExecResult` (timeout 124). How an OOM is told
 * apart from a kill is the backend's (`CommandEnds`); for a container, its cgroup's count.
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { AdoptedExec, ExecOptions, ExecResult } from '../types.js'
import type { AgentClient } from './agent-client.js'
import type { AgentExecution } from './agent-types.js'
import type { SandboxCgroup } from './cgroup-types.js'
import { resolveUser, UserDefaults } from './users.js'

/** The agent's cap for output nobody capped: beyond any command's reach (the agent counts in 64 bits). */
const UNCAPPED_OUTPUT = Number.MAX_SAFE_INTEGER

/** How a backend reads the ways a command can end that the agent alone cannot tell. */
export interface CommandEnds {
  /** A command SIGKILLed by nobody who asked: true when the OOM killer did it. */
  killedByOom (): Promise<boolean>
  /** The agent went away mid-command: true when the sandbox ended for memory. */
  lostToOom (): Promise<boolean>
  /** True when `err` from the agent means the sandbox went away (else it is the caller's to see). */
  isLoss (err: unknown): boolean
  /** The result's message when the sandbox went away. */
  lostMessage: string
  /**
   * A command past its timeout (and a grace) that its agent, asked to kill it, has not ended
   * either: the backend may give up on an agent it does not trust (a VM's), and answers true
   * when it did. Called a grace apart until the command ends; absent, the host waits on the agent.
   */
  overdue?: () => Promise<boolean>
}

/** How long past a command's timeout the host waits on its agent, then again after asking it to kill. */
export const OverdueDefaults = { graceMs: 10_000 }

/**
 * Runs one command to its end through `agent` (see `Backend.exec`).
 * @returns how it ended; an agent that went away mid-command is exit 137, reason oom or killed
 */
export async function runAgentCommand (agent: AgentClient, env: Record<string, string>, argv: readonly string[], opts: ExecOptions, ends: CommandEnds): Promise<ExecResult> {
  const started = performance.now()
  try {
    const who = opts.user !== undefined
      ? await resolveUser(opts.user, async () => await agent.files.read('/etc/passwd', { length: UserDefaults.maxPasswdBytes }))
      : undefined
    // With credit the consumer bounds what is held of the output, so none is cut unless asked.
    const maxOutputBytes = opts.maxOutputBytes ?? (opts.credit !== undefined ? UNCAPPED_OUTPUT : undefined)
    const execution = agent.startExec(argv, {
      env: { ...(who?.home !== undefined ? { HOME: who.home } : {}), ...env, ...opts.env },
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(who !== undefined ? { uid: who.uid, gid: who.gid } : {}),
      ...(opts.pty !== undefined ? { pty: { cols: opts.pty.cols, rows: opts.pty.rows } } : {}),
      ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}),
      ...(opts.credit !== undefined ? { windowBytes: opts.credit.windowBytes } : {}),
      ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
      ...(opts.resume !== undefined ? { retain: { tag: opts.resume.tag } } : {})
    }, handlersOf(opts))
    return await followCommand(execution, opts, ends)
  } catch (err) {
    return await lost(err, started, ends)
  }
}

/**
 * Takes up a resumable command of a sandbox whose agent outlived the node (`Backend.reattach`):
 * found by its tag, its kept output from `opts.fromSeq` on, then followed as `runAgentCommand` does.
 * @throws WARREN_ERR_NOT_FOUND when the agent no longer has it
 */
export async function reattachAgentCommand (agent: AgentClient, tag: string, opts: ExecOptions & { fromSeq: number }, ends: CommandEnds): Promise<ExecResult> {
  const started = performance.now()
  const found = (await agent.listExecs()).find((x) => x.tag === tag)
  if (found === undefined) throw createError(ErrorCodes.NOT_FOUND, `the sandbox's agent has no command ${tag} to take up`, { tag })
  try {
    const execution = agent.attachExec(found.id, {
      fromSeq: opts.fromSeq, ...(opts.credit !== undefined ? { windowBytes: opts.credit.windowBytes } : {})
    }, handlersOf(opts))
    if (opts.signal !== undefined) {
      const onAbort = (): void => { execution.kill().catch(() => {}) }
      if (opts.signal.aborted) onAbort()
      else opts.signal.addEventListener('abort', onAbort, { once: true })
    }
    return await followCommand(execution, opts, ends)
  } catch (err) {
    return await lost(err, started, ends)
  }
}

/**
 * The resumable commands an agent keeps, as `adopt` and `resume` report them (`AdoptedExec`):
 * each is taken up from the seq its last host acknowledged.
 */
export async function resumableCommands (agent: AgentClient): Promise<AdoptedExec[]> {
  return (await agent.listExecs()).map((x) => ({ tag: x.tag, fromSeq: x.acked, ended: x.ended }))
}

/**
 * At the first resume of a sandbox adopted paused (`unlisted`): its resumable commands, which its
 * frozen agent could not list at adopt (listing also keeps new exec ids clear of theirs); later
 * resumes, and an agent that does not answer, list none.
 */
export async function commandsAtFirstResume (entry: { unlisted?: boolean, agent: AgentClient }): Promise<AdoptedExec[] | undefined> {
  if (entry.unlisted !== true) return undefined
  entry.unlisted = false
  return await resumableCommands(entry.agent).catch(() => [])
}

function handlersOf (opts: ExecOptions): { onStdout?: (c: Uint8Array) => void, onStderr?: (c: Uint8Array) => void } {
  return {
    ...(opts.onStdout !== undefined ? { onStdout: opts.onStdout } : {}),
    ...(opts.onStderr !== undefined ? { onStderr: opts.onStderr } : {})
  }
}

/** Passes credit, resizes and acks on to a started command and reads how it ended. */
async function followCommand (execution: AgentExecution, opts: ExecOptions, ends: CommandEnds): Promise<ExecResult> {
  opts.credit?.onGrant((bytes) => execution.grant(bytes))
  opts.resume?.onAck((seq) => { try { execution.ack(seq) } catch { /* the connection is gone: the next host acks */ } })
  // A resize that comes after the command ended has nothing to resize.
  opts.pty?.onResize((size) => { execution.resize(size).catch(() => {}) })
  const stopHolding = opts.timeoutMs !== undefined && ends.overdue !== undefined ? holdToTimeout(execution, opts.timeoutMs, ends.overdue) : () => {}
  let r
  try {
    r = await execution.result
  } finally {
    stopHolding()
  }
  const oom = r.signal === 9 && !r.timedOut && !r.killed && await ends.killedByOom()
  const reason = r.timedOut ? 'timeout' as const : oom ? 'oom' as const : r.killed ? 'killed' as const : undefined
  return {
    exitCode: r.timedOut ? 124 : r.exitCode,
    durationMs: r.durationMs,
    truncated: r.truncated,
    ...(reason !== undefined ? { reason } : {})
  }
}

/**
 * The agent enforces a command's timeout; the host holds it to that: a grace past the timeout the
 * command is killed through the agent, and each grace after, while it has not ended, `overdue`
 * is asked (a VM's backend gives up on the agent, which ends the VM and so the command).
 * @returns the stop, for when the command ends
 */
function holdToTimeout (execution: AgentExecution, timeoutMs: number, overdue: () => Promise<boolean>): () => void {
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  // Round 0 asks the agent to kill it; later rounds, a grace on, ask `overdue` as well.
  const check = async (round: number): Promise<void> => {
    if (stopped) return
    execution.kill().catch(() => {})
    if (round > 0 && (await overdue().catch(() => false) || stopped)) return
    timer = setTimeout(() => { void check(round + 1) }, OverdueDefaults.graceMs)
  }
  timer = setTimeout(() => { void check(0) }, timeoutMs + OverdueDefaults.graceMs)
  return () => { stopped = true; clearTimeout(timer) }
}

/** A command whose agent went away: exit 137, reason oom or killed (anything else is rethrown). */
async function lost (err: unknown, started: number, ends: CommandEnds): Promise<ExecResult> {
  if (!ends.isLoss(err)) throw err
  const oom = await ends.lostToOom().catch(() => false)
  return { exitCode: 137, durationMs: performance.now() - started, truncated: false, reason: oom ? 'oom' : 'killed', message: ends.lostMessage }
}

/** What a command needs of its container sandbox. */
export interface CommandTarget {
  agent: AgentClient
  /** The sandbox's environment (`ExecOptions.env` is laid over it). */
  env: Record<string, string>
  cgroup: SandboxCgroup | undefined
}

/** How a container tells an OOM from a kill: its cgroup's count. */
function containerEnds (target: CommandTarget): CommandEnds {
  const cgroupOom = async (): Promise<boolean> => target.cgroup !== undefined && await target.cgroup.oomKills() > 0
  return {
    killedByOom: cgroupOom,
    lostToOom: cgroupOom,
    // Out of memory, or the sandbox was killed. (Anything but a WarrenError counts as that too.)
    isLoss: (err) => !(isWarrenError(err) && err.code !== ErrorCodes.CONNECTION_CLOSED),
    lostMessage: 'the sandbox ended during the command'
  }
}

/** Takes up a resumable command of a container sandbox after a node restart (see `reattachAgentCommand`). */
export async function reattachCommand (target: CommandTarget, tag: string, opts: ExecOptions & { fromSeq: number }): Promise<ExecResult> {
  return await reattachAgentCommand(target.agent, tag, opts, containerEnds(target))
}

/**
 * Runs one command in a container sandbox: an OOM is a kill while its cgroup counts OOM kills.
 * @returns how it ended; an agent that went away mid-command is exit 137, reason oom or killed
 */
export async function runCommand (target: CommandTarget, argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return await runAgentCommand(target.agent, target.env, argv, opts, containerEnds(target))
}
