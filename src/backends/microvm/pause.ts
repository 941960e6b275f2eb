/**
 * Pause, resume and the freeze a snapshot takes, for one VM. Two holds, used together:
 *
 *   the guest's freezer   the cgroup every command runs in (the agent stays outside it, vm.c),
 *                         frozen through the agent's file calls: the commands stop, the agent
 *                         still answers, so a snapshot can stream their tree out;
 *   the vCPUs             QMP `stop`: nothing of the guest runs, its QEMU's CPU goes idle.
 *
 * A pause freezes the commands first, then stops the vCPUs (a guest whose agent does not answer
 * in time is stopped all the same); a resume runs the vCPUs, thaws the commands and gives the
 * guest the host's time (its clock stood still). A snapshot of a running VM freezes the
 * commands only; of a paused one, runs the vCPUs for it (the commands stay frozen) and stops
 * them after. One at a time, as in containers (container/freeze-control.ts).
 *
 * The paused flag is journaled before a pause begins and after a resume ended, so a node that
 * restarts finds a stopped VM marked paused, never the other way round (adopt settles the rest).
 */
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import type { AgentClient } from '../container/agent-client.js'
import type { FreezeControl } from '../container/freeze-control.js'
import { MicrovmDefaults } from './defaults.js'
import { setVcpus } from './vm-state.js'

const GROUP = '/sys/fs/cgroup/sandbox'
const enc = new TextEncoder()

/**
 * Freezes (or thaws) the guest's commands and waits until the kernel says they are; rejects
 * with WARREN_ERR_TIMEOUT after `timeoutMs`.
 */
export async function freezeCommands (agent: AgentClient, frozen: boolean, timeoutMs: number = MicrovmDefaults.freezeTimeoutMs): Promise<void> {
  await agent.files.write(`${GROUP}/cgroup.freeze`, enc.encode(frozen ? '1' : '0'), { offset: 0, mkdirs: false })
  const deadline = Date.now() + timeoutMs
  const want = `frozen ${frozen ? 1 : 0}`
  for (;;) {
    const events = new TextDecoder().decode(await agent.files.read(`${GROUP}/cgroup.events`, { offset: 0, length: 4096 }))
    if (events.split('\n').includes(want)) return
    if (Date.now() > deadline) throw createError(ErrorCodes.TIMEOUT, `the guest's commands did not ${frozen ? 'freeze' : 'thaw'} within ${timeoutMs} ms`, { timeoutMs })
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** What the pause control of one VM works on. */
export interface VmPauseTarget {
  qmpSocket: string
  agent: AgentClient
}

/** A VM's pause control: the container's, and the stop a memory snapshot takes. */
export interface VmPauseControl extends FreezeControl {
  /**
   * Runs `work` with the vCPUs stopped and the commands as they are (a memory snapshot: what is
   * saved goes on running where it is restored), then runs them again and gives the guest the
   * host's time, unless the VM was paused (it stays so).
   */
  whileStopped<T> (work: () => Promise<T>): Promise<T>
}

/**
 * The pause control of one VM.
 * @param paused whether it starts paused (adopted stopped after a node restart)
 * @param onPaused records the flag (the backend's journal); called before a pause, after a resume
 */
export function createVmPause (vm: VmPauseTarget, paused: boolean, onPaused: (paused: boolean) => void): VmPauseControl {
  let turn: Promise<unknown> = Promise.resolve()
  /** Whether the pause froze the commands too (a guest that did not answer was only stopped). */
  let commandsFrozen = paused
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = turn.then(fn, fn)
    turn = next.catch(() => {})
    return next
  }

  return {
    get paused () { return paused },

    pause: async () => {
      await serial(async () => {
        if (paused) return
        onPaused(true)
        try {
          commandsFrozen = await freezeCommands(vm.agent, true).then(() => true, (err: unknown) => {
            if (isWarrenError(err, ErrorCodes.CONNECTION_CLOSED) || isWarrenError(err, ErrorCodes.SANDBOX_GONE)) throw err
            return false
          })
          await setVcpus(vm.qmpSocket, false)
        } catch (err) {
          onPaused(false)
          throw err
        }
        paused = true
      })
    },

    resume: async () => {
      await serial(async () => {
        if (!paused) return
        await setVcpus(vm.qmpSocket, true)
        paused = false
        // The guest's clock stood still while it was stopped.
        await vm.agent.setIdentity({ timeMs: Date.now() }).catch(() => {})
        if (commandsFrozen) await freezeCommands(vm.agent, false)
        commandsFrozen = false
        onPaused(false)
      })
    },

    whileStopped: async <T>(work: () => Promise<T>): Promise<T> => {
      return await serial(async () => {
        if (paused) return await work()
        await setVcpus(vm.qmpSocket, false)
        try {
          return await work()
        } finally {
          await setVcpus(vm.qmpSocket, true).catch(() => {})
          // Its clock stood still while it was saved.
          await vm.agent.setIdentity({ timeMs: Date.now() }).catch(() => {})
        }
      })
    },

    whileFrozen: async <T>(work: () => Promise<T>): Promise<T> => {
      return await serial(async () => {
        if (!paused) {
          await freezeCommands(vm.agent, true)
          try {
            return await work()
          } finally {
            await freezeCommands(vm.agent, false).catch(() => {})
          }
        }
        // Paused: the agent needs its vCPUs to stream; the commands stay frozen meanwhile.
        await setVcpus(vm.qmpSocket, true)
        try {
          if (!commandsFrozen) { await freezeCommands(vm.agent, true); commandsFrozen = true }
          return await work()
        } finally {
          await setVcpus(vm.qmpSocket, false).catch(() => {})
        }
      })
    }
  }
}
