/**
 * The guest's agent is the tenant's (its root can stop it, or speak for it): one that stops
 * answering must not leave commands and file calls waiting for ever. Every `agentCheckEveryMs`,
 * each VM whose agent has left a request or a command's start unanswered for `agentStallMs`,
 * while its vCPUs run (not paused, not stopped for a save: QEMU says), is pinged; no answer
 * within `agentPingMs` and its agent is given up, which ends the VM (the backend's watch of the
 * agent); so is one that answers pings but leaves a command's start unanswered for both times
 * together. A long command is no stall: it answered when it started. (A command past its
 * timeout is held to it apart, container/exec.ts `holdToTimeout`.)
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { AgentClient } from '../container/agent-client.js'
import { MicrovmDefaults } from './defaults.js'

/** What the watchdog needs of a live VM. */
export interface WatchedVm {
  agent: AgentClient
  paused: boolean
  /** True while its vCPUs run (QEMU says): a VM stopped for a save or a pause owes no answer. */
  running: () => Promise<boolean>
}

export interface AgentWatchdog {
  /** Looks at every VM once now (the timer does it every `agentCheckEveryMs`). */
  check (): Promise<void>
  stop (): void
}

/** @param vms the live VMs, asked afresh at each check */
export function createAgentWatchdog (vms: () => Iterable<WatchedVm>): AgentWatchdog {
  let running: Promise<void> | undefined
  const checkOne = async (vm: WatchedVm): Promise<void> => {
    const waited = vm.agent.oldestWaitMs()
    if (vm.paused || vm.agent.closed || waited < MicrovmDefaults.agentStallMs) return
    // A VM stopped for a save, or for a pause under way, does not answer, and is not stalled.
    if (!await vm.running().catch(() => false)) return
    // A command's start unanswered for the stall and a ping's time together is no slow agent but
    // one answering pings alone (a guest's root can make it so): given up whatever a ping says.
    if (waited >= MicrovmDefaults.agentStallMs + MicrovmDefaults.agentPingMs) {
      vm.agent.abandon(createError(ErrorCodes.PEER_UNRESPONSIVE, `it left a command's start unanswered for over ${Math.round(waited / 1000)} s`))
      return
    }
    const silent = await vm.agent.ping(MicrovmDefaults.agentPingMs).then(() => false, (err: unknown) => isWarrenError(err, ErrorCodes.TIMEOUT))
    if (!silent || vm.paused) return
    vm.agent.abandon(createError(ErrorCodes.PEER_UNRESPONSIVE,
      `it left a request unanswered for over ${MicrovmDefaults.agentStallMs / 1000} s and did not answer a ping within ${MicrovmDefaults.agentPingMs / 1000} s`))
  }
  const check = (): Promise<void> => {
    // One round at a time: a round waits up to a ping's time.
    running ??= Promise.all([...vms()].map(checkOne)).then(() => undefined, () => undefined).finally(() => { running = undefined })
    return running
  }
  const timer = setInterval(() => { void check() }, MicrovmDefaults.agentCheckEveryMs)
  timer.unref()
  return { check, stop: () => clearInterval(timer) }
}
