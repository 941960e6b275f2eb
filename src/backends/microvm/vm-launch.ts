/**
 * Making one VM of a shape, the three ways there are: restored from the shape's template (QEMU
 * `-incoming` from its saved state, its RAM the template's file mapped private), booted cold
 * (the template's first VM, or when templates are off or broken), and the template itself (a
 * boot with its RAM a shared file, saved, ended). Each in its own cgroups and journaled from the
 * moment QEMU runs, so a crash at any point leaves a record for adopt to reclaim.
 */
import { nanoid } from 'nanoid'
import { randomBytes } from 'node:crypto'
import { basename } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { CgroupProvider, SandboxCgroup } from '../container/cgroup-types.js'
import type { AgentClient } from '../container/agent-client.js'
import { MicrovmDefaults } from './defaults.js'
import type { GuestImage } from './guest/index.js'
import type { GuestRam } from './guest-ram.js'
import { destroyVm, launchVm, reshareMemoryState, type LaunchedVm, type LaunchVmOptions } from './launcher.js'
import { templateKeyOf, type VmShape } from './shape.js'
import { templateKey, type TemplateStore, type VmTemplate } from './templates.js'
import { saveVmState } from './vm-state.js'

/** What the launcher needs of its backend. */
export interface VmLaunchDeps {
  runDir: string
  accel: 'kvm' | 'tcg'
  /** QEMU's `-cpu` for that accelerator (accel.ts). */
  cpu: string
  tscKhz: number | undefined
  extraCmdline: string | undefined
  cgroups: CgroupProvider | undefined
  guest: () => Promise<GuestImage>
  /** Saved VMs to restore from; undefined: every VM boots. */
  templates: TemplateStore | undefined
  /** Memory snapshots made shareable, bounded apart from the templates; undefined: every fork loads the whole stream. */
  memoryTemplates: TemplateStore | undefined
  /** Journals a VM that is starting (unclaimed), or forgets it (undefined). */
  journal: (vm: LaunchedVm, refs: string[]) => void
  unjournal: (id: string) => void
  /** Told when a template could not be made or restored from (that VM boots instead). */
  onTemplateFailure?: (err: unknown) => void
}

/** A VM made and answering: what the backend keeps of it. */
export interface MadeVm {
  vm: LaunchedVm
  agent: AgentClient
  cgroup: SandboxCgroup | undefined
  /** True when it was restored from a template, not booted. */
  restored: boolean
}

/** The hostname a template boots with; a VM restored from it is renamed at once. */
const TEMPLATE_NAME = 'warren-template'

export interface VmLauncher {
  /** Makes a VM of `shape` named `name` (its hostname) with id `id`. */
  make (id: string, shape: VmShape, name: string): Promise<MadeVm>
  /**
   * Makes a VM of `shape` from a memory snapshot's state (saved by `saveVmState` with the RAM in
   * the stream): the guest goes on from that instant, its processes with it, under a name and
   * randomness of its own.
   */
  fromMemory (id: string, shape: VmShape, name: string, stateFile: string): Promise<MadeVm>
  /** Templates are off from now on (they failed here `MicrovmDefaults.templateFailures` times running). */
  readonly templatesBroken: boolean
}

export function createVmLauncher (d: VmLaunchDeps): VmLauncher {
  let broken = d.templates === undefined
  let failures = 0
  const failed = (err: unknown): void => {
    if (++failures >= MicrovmDefaults.templateFailures) broken = true
    d.onTemplateFailure?.(err)
  }
  // QEMU's memory is the guest's plus its own (and TCG's code cache); its threads are its own count.
  const overheadMiB = MicrovmDefaults.qemuOverheadMiB + (d.accel === 'tcg' ? MicrovmDefaults.tcgCacheMiB : 0)

  /** Runs `work` with fresh cgroups for a VM of `shape` and what `launchVm` is given for it; the groups go again if it fails. */
  async function inCgroups<T> (id: string, shape: VmShape, hostname: string, work: (opts: LaunchVmOptions, cgroup: SandboxCgroup | undefined) => Promise<T>): Promise<T> {
    const image = await d.guest()
    let cgroup: SandboxCgroup | undefined
    try {
      cgroup = await d.cgroups?.create(id, { cpus: shape.cpus, memoryMiB: shape.memoryMiB + overheadMiB, diskMiB: 0, pids: MicrovmDefaults.qemuPids + shape.vcpus })
      return await work({
        id,
        hostname,
        layers: shape.layers,
        guest: image,
        vcpus: shape.vcpus,
        memoryMiB: shape.memoryMiB,
        diskMiB: shape.diskMiB,
        pids: shape.pids,
        accel: d.accel,
        cpu: d.cpu,
        ...(d.tscKhz !== undefined ? { tscKhz: d.tscKhz } : {}),
        ...(cgroup !== undefined ? { cgroups: cgroup.dirs } : {}),
        runDir: d.runDir,
        ...(d.extraCmdline !== undefined ? { extraCmdline: d.extraCmdline } : {}),
        // Journaled while it starts: a crash from here on leaves a record to reclaim.
        onStarted: (started) => d.journal(started, shape.refs)
      }, cgroup)
    } catch (err) {
      d.unjournal(id)
      await cgroup?.remove().catch(() => {})
      throw err
    }
  }

  /** Starts QEMU in fresh cgroups; the VM and its groups go again if it fails to answer. */
  async function start (id: string, shape: VmShape, hostname: string, extra: Pick<LaunchVmOptions, 'ram' | 'restoreFrom' | 'restoreHangsUp'>): Promise<MadeVm> {
    return await inCgroups(id, shape, hostname, async (opts, cgroup) => {
      const { vm, agent } = await launchVm({ ...opts, ...extra })
      return { vm, agent, cgroup, restored: extra.restoreFrom !== undefined }
    })
  }

  /** Boots the shape's template: RAM in the store's file, shared; its state saved; then ended. */
  async function buildTemplate (shape: VmShape, parts: { ram: GuestRam, stateFile: string }): Promise<void> {
    const id = `t${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`
    const made = await start(id, shape, TEMPLATE_NAME, { ram: { of: parts.ram, share: true } })
    try {
      // The guest hears the hang-up and opens its port again, as it will be found when restored.
      await made.agent.close()
      await new Promise((resolve) => setTimeout(resolve, 200))
      await saveVmState(made.vm, parts.stateFile, { ram: 'shared-file' })
    } finally {
      await destroyVm(made.vm).catch(() => {})
      await made.cgroup?.remove().catch(() => {})
      d.unjournal(id)
    }
  }

  async function template (shape: VmShape): Promise<VmTemplate | undefined> {
    if (broken || d.templates === undefined) return undefined
    const key = templateKeyOf(shape, await d.guest(), `${d.accel}:${d.cpu}`, d.extraCmdline)
    try {
      return await d.templates.get(key, shape.memoryMiB, async (parts) => await buildTemplate(shape, parts))
    } catch (err) {
      failed(err)
      return undefined
    }
  }

  /**
   * A memory snapshot's state made shareable on this node, once (launcher.ts `reshareMemoryState`):
   * its RAM sealed in the node's hands (guest-ram.ts), its machine state saved without the RAM.
   * Kept in a store of their own (`memoryTemplates`); undefined when that is off or it failed.
   */
  async function memoryTemplate (shape: VmShape, stateFile: string): Promise<VmTemplate | undefined> {
    if (d.memoryTemplates === undefined) return undefined
    const key = templateKey({ memory: basename(stateFile), shape: templateKeyOf(shape, await d.guest(), `${d.accel}:${d.cpu}`, d.extraCmdline) })
    try {
      return await d.memoryTemplates.get(key, shape.memoryMiB, async (parts) => {
        const id = `m${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`
        await inCgroups(id, shape, TEMPLATE_NAME, async (opts, cgroup) => {
          try {
            await reshareMemoryState({ ...opts, stateFile, ram: parts.ram, savedStateFile: parts.stateFile })
          } finally {
            await cgroup?.remove().catch(() => {})
            d.unjournal(id)
          }
        })
      })
    } catch (err) {
      // Not counted towards turning templates off: a snapshot is a tenant's, and so is its failure.
      d.onTemplateFailure?.(err)
      return undefined
    }
  }

  /** A VM from a saved state: a template's (its sealed RAM mapped private) or a memory snapshot's (RAM in the stream, or made shareable). */
  async function restore (id: string, shape: VmShape, name: string, from: { stateFile: string, ram?: GuestRam, hangsUp?: boolean }): Promise<MadeVm> {
    const made = await start(id, shape, TEMPLATE_NAME, {
      ...(from.ram !== undefined ? { ram: { of: from.ram, share: false } } : {}),
      restoreFrom: from.stateFile,
      ...(from.hangsUp !== undefined ? { restoreHangsUp: from.hangsUp } : {})
    })
    try {
      // Its own name, randomness of its own (else every VM restored from this state draws the
      // same numbers), and the time (its clock stopped when the template was saved).
      await made.agent.setIdentity({ name, seed: randomBytes(MicrovmDefaults.seedBytes), timeMs: Date.now() })
      return made
    } catch (err) {
      await unmake(id, made)
      throw err
    }
  }

  /** Ends a VM made here that failed after it answered: process, cgroup, journal record. */
  async function unmake (id: string, made: MadeVm): Promise<void> {
    await made.agent.close().catch(() => {})
    await destroyVm(made.vm).catch(() => {})
    await made.cgroup?.remove().catch(() => {})
    d.unjournal(id)
  }

  return {
    get templatesBroken () { return broken },

    async make (id, shape, name) {
      const t = await template(shape)
      if (t !== undefined) {
        try {
          const made = await restore(id, shape, name, t)
          failures = 0
          return made
        } catch (err) {
          failed(err) // and it boots below
        }
      }
      return await start(id, shape, name, {})
    },

    async fromMemory (id, shape, name, stateFile) {
      // Shared once per node: every VM from this snapshot maps its RAM private, as a template's do.
      const shared = await memoryTemplate(shape, stateFile)
      let made: MadeVm | undefined
      if (shared !== undefined) {
        try {
          made = await restore(id, shape, name, { stateFile: shared.stateFile, ram: shared.ram, hangsUp: true })
        } catch (err) {
          // And it loads the whole stream below. A guest that does not answer is its tenant's
          // failure: it does not count towards turning the node's templates off.
          d.onTemplateFailure?.(err)
        }
      }
      made ??= await restore(id, shape, name, { stateFile })
      try {
        await endSourceCommands(made.agent)
        return made
      } catch (err) {
        await unmake(id, made)
        throw err
      }
    }
  }
}

/** How long a fork waits, in all, for its source's commands to end once killed. */
const SOURCE_COMMAND_END_MS = 5_000

/**
 * The commands a memory snapshot's source was streaming when it was saved are resumable ones
 * (the guest's agent keeps them for the next host): they belong to the source's node, which
 * still follows them there. In a fork they are killed and their records released, so nobody
 * takes them up after a restart and new exec ids stay clear of theirs (processes started in
 * the background run on, as saved).
 */
async function endSourceCommands (agent: AgentClient): Promise<void> {
  const runs = (await agent.listExecs()).map((x) => {
    // A window past anything kept: what it had is sent at once and dropped here.
    const run = agent.attachExec(x.id, { fromSeq: x.acked, windowBytes: Number.MAX_SAFE_INTEGER })
    if (!x.ended) run.kill().catch(() => {})
    return run
  })
  // Bounded in all, whatever the guest lists: a fork's create waits at most this long for them.
  await Promise.race([Promise.allSettled(runs.map(async (r) => await r.result)), sleep(SOURCE_COMMAND_END_MS, undefined, { ref: false })])
  // Past its exit's seq: the agent forgets it.
  for (const run of runs) run.ack(Number.MAX_SAFE_INTEGER)
}
