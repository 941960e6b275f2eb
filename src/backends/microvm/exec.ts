/**
 * One command in a VM: the agent's exec, with the sandbox's environment and the caller's options,
 * and how it ended told apart: out of memory inside the guest (its kernel's OOM killer, counted
 * in /proc/vmstat) or on the host (QEMU's cgroup killed the VM), killed, timed out.
 */
import { ErrorCodes, isWarrenError } from '../../errors.js'
import type { AgentClient } from '../container/agent-client.js'
import { resolveUser, UserDefaults } from '../container/users.js'
import type { ExecOptions, ExecResult } from '../types.js'

/** The agent's cap for output nobody capped: beyond any command's reach (the agent counts in 64 bits). */
const UNCAPPED_OUTPUT = Number.MAX_SAFE_INTEGER
/** /proc/vmstat is a few KiB; more than this is not the kernel's. */
const VMSTAT_BYTES = 64 * 1024

/** What `runInVm` needs of the VM it runs in. */
export interface VmExecTarget {
  agent: AgentClient
  /** Variables every command starts with. */
  env: Record<string, string>
  /** The guest's OOM kill count when last looked at. */
  oomSeen: number
  /** OOM kills in QEMU's host cgroup (a VM killed whole). */
  hostOomKills?: () => Promise<number>
}

/** The guest kernel's count of OOM kills so far (`oom_kill` of /proc/vmstat); 0 if unreadable. */
export async function guestOomKills (agent: AgentClient): Promise<number> {
  try {
    const text = new TextDecoder().decode(await agent.files.read('/proc/vmstat', { length: VMSTAT_BYTES }))
    return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0)
  } catch {
    return 0
  }
}

/**
 * Runs `argv` to its end in the VM, streaming through the callbacks in `opts`.
 * @throws what the agent refused the command with (e.g. WARREN_ERR_NOT_FOUND for a missing program)
 */
export async function runInVm (vm: VmExecTarget, argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const started = performance.now()
  try {
    const who = opts.user !== undefined
      ? await resolveUser(opts.user, async () => await vm.agent.files.read('/etc/passwd', { length: UserDefaults.maxPasswdBytes }))
      : undefined
    // With credit the consumer bounds what is held of the output, so none is cut unless asked.
    const maxOutputBytes = opts.maxOutputBytes ?? (opts.credit !== undefined ? UNCAPPED_OUTPUT : undefined)
    const execution = vm.agent.startExec(argv, {
      env: { ...(who?.home !== undefined ? { HOME: who.home } : {}), ...vm.env, ...opts.env },
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(who !== undefined ? { uid: who.uid, gid: who.gid } : {}),
      ...(opts.pty !== undefined ? { pty: { cols: opts.pty.cols, rows: opts.pty.rows } } : {}),
      ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}),
      ...(opts.credit !== undefined ? { windowBytes: opts.credit.windowBytes } : {}),
      ...(opts.signal !== undefined ? { signal: opts.signal } : {})
    }, {
      ...(opts.onStdout !== undefined ? { onStdout: opts.onStdout } : {}),
      ...(opts.onStderr !== undefined ? { onStderr: opts.onStderr } : {})
    })
    opts.credit?.onGrant((bytes) => execution.grant(bytes))
    // A resize that comes after the command ended has nothing to resize.
    opts.pty?.onResize((size) => { execution.resize(size).catch(() => {}) })
    const r = await execution.result
    let oom = false
    if (r.signal === 9 && !r.timedOut && !r.killed) {
      const kills = await guestOomKills(vm.agent)
      oom = kills > vm.oomSeen
      vm.oomSeen = Math.max(vm.oomSeen, kills)
    }
    const reason = r.timedOut ? 'timeout' as const : oom ? 'oom' as const : r.killed ? 'killed' as const : undefined
    return { exitCode: r.timedOut ? 124 : r.exitCode, durationMs: r.durationMs, truncated: r.truncated, ...(reason !== undefined ? { reason } : {}) }
  } catch (err) {
    // A refusal, or what a handler threw, is the caller's to see.
    if (!isWarrenError(err, ErrorCodes.CONNECTION_CLOSED)) throw err
    // The agent went away mid-command: the VM ended (its QEMU killed for memory, or the VM killed).
    const oom = vm.hostOomKills !== undefined && await vm.hostOomKills().catch(() => 0) > 0
    return { exitCode: 137, durationMs: performance.now() - started, truncated: false, reason: oom ? 'oom' : 'killed', message: 'the VM ended during the command' }
  }
}
