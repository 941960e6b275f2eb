/**
 * One command in a VM: the agent's exec (container/exec.ts, the same agent), with how it ended
 * told apart: out of memory inside the guest (its kernel's OOM killer, counted
 * in /proc/vmstat) or on the host (QEMU's cgroup killed the VM), killed, timed out.
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { AgentClient } from '../container/agent-client.js'
import { reattachAgentCommand, runAgentCommand, type CommandEnds } from '../container/exec.js'
import type { ExecOptions, ExecResult } from '../types.js'

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
  /** True while the guest runs (not paused, vCPUs not stopped): only then does its agent owe an answer. */
  running?: () => Promise<boolean>
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

/** How a command in a VM ended when the agent alone cannot tell: the guest's count, or QEMU's cgroup. */
function vmEnds (vm: VmExecTarget): CommandEnds {
  return {
    // The guest kernel counts its OOM kills: one more than last seen is this command's.
    killedByOom: async () => {
      const kills = await guestOomKills(vm.agent)
      const oom = kills > vm.oomSeen
      vm.oomSeen = Math.max(vm.oomSeen, kills)
      return oom
    },
    // The VM ended: its QEMU killed for memory by the host cgroup, or the VM killed.
    lostToOom: async () => vm.hostOomKills !== undefined && await vm.hostOomKills() > 0,
    // A refusal, or what a handler threw, is the caller's to see; the agent given up is a loss.
    isLoss: (err) => isWarrenError(err, ErrorCodes.CONNECTION_CLOSED) || isWarrenError(err, ErrorCodes.PEER_UNRESPONSIVE),
    lostMessage: 'the VM ended during the command',
    // Its agent is the guest's: one that does not end a command past its timeout, even when told
    // to kill it, while the guest runs, is given up (the VM ends, and the command with it).
    overdue: async () => {
      if (vm.running !== undefined && !await vm.running()) return false
      vm.agent.abandon(createError(ErrorCodes.PEER_UNRESPONSIVE, 'it did not end a command past its timeout, nor when told to kill it'))
      return true
    }
  }
}

/**
 * Runs `argv` to its end in the VM, streaming through the callbacks in `opts`.
 * @throws what the agent refused the command with (e.g. WARREN_ERR_NOT_FOUND for a missing program)
 */
export async function runInVm (vm: VmExecTarget, argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return await runAgentCommand(vm.agent, vm.env, argv, opts, vmEnds(vm))
}

/**
 * Takes up a resumable command of a VM whose guest agent outlived the node (`Backend.reattach`).
 * @throws WARREN_ERR_NOT_FOUND when the guest's agent no longer has it
 */
export async function reattachInVm (vm: VmExecTarget, tag: string, opts: ExecOptions & { fromSeq: number }): Promise<ExecResult> {
  return await reattachAgentCommand(vm.agent, tag, opts, vmEnds(vm))
}
