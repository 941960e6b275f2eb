/**
 * The microvm backend: each sandbox is a QEMU `-M microvm` guest booted from warren's kernel and
 * initramfs, its root the sandbox's EROFS layers (read-only virtio-blk disks) under a tmpfs of
 * `diskMiB`, reached through the same agent as containers over a virtio serial port. QEMU runs in
 * its own cgroups (CPU quota, guest memory + QEMU's overhead, threads) and outlives the node
 * agent: every VM is journaled from the moment QEMU runs, so a restarted node re-adopts the ones
 * that still answer (QMP, then the agent) and reclaims the rest.
 *
 * Not here yet: snapshots, pause, fork, a warm pool, egress (a create asking for egress is refused).
 */
import { nanoid } from 'nanoid'
import { readdir, rm, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { LayerStore, type LayerSource } from '../../images/index.js'
import type { CgroupProvider, SandboxCgroup } from '../container/backend.js'
import { connectAgent, type AgentClient } from '../container/agent-client.js'
import { Journal } from '../container/journal.js'
import { isAlive } from '../container/proc.js'
import { AgentLimits } from '../container/protocol.js'
import type { AdoptedSandbox, Backend, SandboxHandle, SandboxSpec } from '../types.js'
import { MicrovmDefaults } from './defaults.js'
import { guestOomKills, runInVm, type VmExecTarget } from './exec.js'
import { prepareGuest, type GuestImage } from './guest/index.js'
import { destroyVm, launchVm, type LaunchedVm } from './launcher.js'
import { connectQmp } from './qmp.js'
import { detectAccel, hostTscKhz } from './qemu-args.js'

export interface MicrovmBackendOptions {
  /** Holds the journal, and the layer store and guest files unless placed elsewhere. */
  dataDir: string
  /** Where layers are cached (default `<dataDir>/layers`). */
  layersDir?: string
  /** Where layers named by digest are fetched from when not cached here. */
  layerSource?: LayerSource
  /** Parent of each VM's socket directory (default `MicrovmDefaults.runDir`); give each node its own. */
  runDir?: string
  /** Groups for QEMU processes; its parent must be this backend's alone (adopt reclaims the rest). */
  cgroups?: CgroupProvider
  /** Where the guest kernel, initramfs and module disk are kept (default `MicrovmDefaults.guestDir`, else `<dataDir>/guest`). */
  guestDir?: string
  /** The operator's guest kernel instead of Debian's, and its module tree. */
  kernel?: string
  kernelModules?: string
  /** Default layer stack when a spec names none. */
  defaultLayers?: string[]
  /** Default: KVM when /dev/kvm opens, else TCG. */
  accel?: 'kvm' | 'tcg'
  /** Kernel parameters added to every VM (`warren.debug=1` writes the guest's set-up steps to its console). */
  extraCmdline?: string
  /** A line per slow step of making the guest (first use only). */
  onProgress?: (line: string) => void
}

export const MicrovmBackendDefaults = { defaultLayers: ['busybox'] }

interface Live extends VmExecTarget {
  vm: LaunchedVm
  refs: string[]
  cgroup: SandboxCgroup | undefined
}

/** `claimed`: handed out (an unclaimed record is a boot a crash interrupted). */
interface JournalEntry { vm: LaunchedVm, meta: unknown, claimed: boolean, refs: string[] }

export interface MicrovmBackend extends Backend {
  /** VMs alive. */
  status (): { live: number, accel: 'kvm' | 'tcg' }
  /** The guest's files, made on first call (creates wait for it too). */
  guest (): Promise<GuestImage>
  /** The QEMU process and host directory of a live VM, for inspection; undefined once it is gone. */
  vm (handle: SandboxHandle): LaunchedVm | undefined
}

type Limits = NonNullable<SandboxSpec['limits']>

/** The refusal of a create asking for what a VM cannot be given, naming the field. */
function badVmLimit (field: string, message: string): Error {
  return createError(ErrorCodes.INVALID_ARGUMENT, message, { field })
}

/** What a VM is given for `limits`: vCPUs, guest memory, writable layer, processes. */
function vmShape (limits: Limits | undefined): { vcpus: number, memoryMiB: number, diskMiB: number, pids: number, cpus: number } {
  const cpus = limits?.cpus ?? 0
  if (!Number.isFinite(cpus) || cpus < 0) throw badVmLimit('limits.cpus', `limits.cpus must be a number >= 0, got ${String(cpus)}`)
  const memoryMiB = limits?.memoryMiB !== undefined && limits.memoryMiB > 0 ? limits.memoryMiB : MicrovmDefaults.memoryMiB
  if (!Number.isInteger(memoryMiB) || memoryMiB < MicrovmDefaults.minMemoryMiB) {
    throw badVmLimit('limits.memoryMiB', `a VM needs at least ${MicrovmDefaults.minMemoryMiB} MiB of memory, got ${String(memoryMiB)}`)
  }
  const diskMiB = limits?.diskMiB ?? MicrovmDefaults.diskMiB
  if (!Number.isInteger(diskMiB) || diskMiB < 0) throw badVmLimit('limits.diskMiB', `limits.diskMiB must be a whole number >= 0, got ${String(diskMiB)}`)
  const pids = limits?.pids ?? MicrovmDefaults.pids
  if (!Number.isInteger(pids) || pids < 0) throw badVmLimit('limits.pids', `limits.pids must be a whole number >= 0, got ${String(pids)}`)
  const vcpus = Math.min(MicrovmDefaults.maxVcpus, Math.max(1, Math.ceil(cpus)))
  return { vcpus, memoryMiB, diskMiB, pids, cpus }
}

export function createMicrovmBackend (options: MicrovmBackendOptions): MicrovmBackend {
  const runDir = options.runDir ?? MicrovmDefaults.runDir
  const accel = options.accel ?? detectAccel()
  const tscKhz = accel === 'tcg' ? hostTscKhz() : undefined
  const store = new LayerStore(options.layersDir ?? join(options.dataDir, 'layers'), options.layerSource)
  const journal = new Journal<JournalEntry>(join(options.dataDir, 'journal'))
  const live = new Map<string, Live>()
  const goneListeners = new Map<string, (message: string) => void>()
  let closed = false

  let guestWork: Promise<GuestImage> | undefined
  function guest (): Promise<GuestImage> {
    guestWork ??= prepareGuest({
      dir: options.guestDir ?? MicrovmDefaults.guestDir ?? join(options.dataDir, 'guest'),
      ...(options.kernel !== undefined ? { kernel: options.kernel } : {}),
      ...(options.kernelModules !== undefined ? { kernelModules: options.kernelModules } : {}),
      ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {})
    })
    // A failure is not remembered: the next create tries again (the network may be back).
    guestWork.catch(() => { guestWork = undefined })
    return guestWork
  }

  const gone = (id: string, message: string): void => {
    const listener = goneListeners.get(id)
    goneListeners.delete(id)
    listener?.(message)
  }
  /** The agent's connection ending, other than by kill or close, means the VM ended. */
  const watch = (id: string, entry: Live): void => {
    void entry.agent.ended.then(() => { if (!closed && live.get(id) === entry) gone(id, 'the VM ended (QEMU exited or the guest powered off)') })
  }

  /** Ends a VM and removes all it had on the host: process, sockets, cgroup, journal record. */
  async function reclaim (entry: Live | JournalEntry): Promise<void> {
    if ('agent' in entry) await entry.agent.close().catch(() => {})
    await destroyVm(entry.vm).catch(() => {})
    const cgroup = 'agent' in entry ? entry.cgroup : options.cgroups?.open?.(entry.vm.id)
    await cgroup?.remove().catch(() => {})
    for (const ref of entry.refs) await store.release(ref).catch(() => {})
    journal.remove(entry.vm.id)
  }

  function find (handle: SandboxHandle): Live {
    const entry = live.get(handle.id)
    if (entry === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `VM ${handle.id} is gone`, { id: handle.id })
    return entry
  }

  async function adoptOne (entry: JournalEntry): Promise<Live> {
    const qmp = await connectQmp(entry.vm.qmpSocket)
    try { await qmp.execute('query-status') } finally { qmp.close() }
    let agent: AgentClient | undefined
    try {
      agent = await connectAgent(entry.vm.agentSocket)
      // The guest's agent hears the old connection hang up and opens its port again for this one.
      await agent.ping()
      return { vm: entry.vm, agent, refs: entry.refs, env: {}, cgroup: options.cgroups?.open?.(entry.vm.id), oomSeen: await guestOomKills(agent) }
    } catch (err) {
      await agent?.close().catch(() => {})
      throw err
    }
  }

  return {
    kind: 'microvm',
    interactiveStdin: true,
    outputCredit: true,
    commandIdentity: true,
    terminal: true,

    async create (spec = {}) {
      if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the microvm backend is closed', { reason: 'closed' })
      if (spec.egress !== undefined && spec.egress.length > 0) {
        throw createError(ErrorCodes.UNSUPPORTED, 'the microvm backend has no egress yet: a VM has loopback only', { field: 'egress' })
      }
      const shape = vmShape(spec.limits)
      const image = await guest()
      const refs = spec.layers !== undefined && spec.layers.length > 0 ? spec.layers : options.defaultLayers ?? MicrovmBackendDefaults.defaultLayers
      const layers = await Promise.all(refs.map(async (r) => await store.resolve(r)))
      const id = spec.id ?? `v${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`
      // QEMU's memory is the guest's plus its own (and TCG's code cache); its threads are its own count.
      const overheadMiB = MicrovmDefaults.qemuOverheadMiB + (accel === 'tcg' ? MicrovmDefaults.tcgCacheMiB : 0)
      let cgroup: SandboxCgroup | undefined
      let launched: { vm: LaunchedVm, agent: AgentClient } | undefined
      try {
        cgroup = await options.cgroups?.create(id, { cpus: shape.cpus, memoryMiB: shape.memoryMiB + overheadMiB, diskMiB: 0, pids: MicrovmDefaults.qemuPids + shape.vcpus })
        const group = cgroup
        launched = await launchVm({
          id,
          hostname: spec.hostname ?? id,
          layers,
          guest: image,
          vcpus: shape.vcpus,
          memoryMiB: shape.memoryMiB,
          diskMiB: shape.diskMiB,
          pids: shape.pids,
          accel,
          ...(tscKhz !== undefined ? { tscKhz } : {}),
          ...(group !== undefined ? { cgroups: group.dirs } : {}),
          runDir,
          ...(options.extraCmdline !== undefined ? { extraCmdline: options.extraCmdline } : {}),
          // Journaled while it boots: a crash from here on leaves a record to reclaim.
          onStarted: (started) => journal.write(id, { vm: started, meta: undefined, claimed: false, refs })
        })
        const { vm, agent } = launched
        const entry: Live = { vm, agent, refs, cgroup, env: spec.env ?? {}, oomSeen: await guestOomKills(agent), ...(group !== undefined ? { hostOomKills: () => group.oomKills() } : {}) }
        if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the microvm backend closed during the create', { reason: 'closed' })
        journal.write(id, { vm, meta: spec.meta, claimed: true, refs })
        live.set(id, entry)
        watch(id, entry)
        return { id, kind: 'microvm' }
      } catch (err) {
        if (launched !== undefined) {
          await launched.agent.close().catch(() => {})
          await destroyVm(launched.vm).catch(() => {})
        }
        journal.remove(id)
        await cgroup?.remove().catch(() => {})
        for (const ref of refs) await store.release(ref).catch(() => {})
        throw err
      }
    },

    async adopt () {
      const adopted: AdoptedSandbox[] = []
      const keep = new Set<string>()
      for (const entry of journal.readAll()) {
        if (entry.claimed && await isAlive(entry.vm.pid, entry.vm.startTime)) {
          try {
            const e = await adoptOne(entry)
            if (e.cgroup !== undefined) { const cg = e.cgroup; e.hostOomKills = () => cg.oomKills() }
            live.set(entry.vm.id, e)
            watch(entry.vm.id, e)
            adopted.push({ handle: { id: entry.vm.id, kind: 'microvm' }, meta: entry.meta })
            keep.add(entry.vm.id)
            continue
          } catch { /* no monitor or no agent answering: reclaimed below */ }
        }
        await reclaim(entry) // dead, unreachable, or a boot a crash interrupted
      }
      // Directories of boots that crashed before their journal record was written.
      for (const name of await readdir(runDir).catch(() => [] as string[])) {
        if (!keep.has(name)) await rm(join(runDir, name), { recursive: true, force: true }).catch(() => {})
      }
      // A group that will not go is no reason to keep the node from starting.
      await options.cgroups?.reclaimOrphans?.(keep).catch(() => {})
      return adopted
    },

    exec: async (handle, argv, opts) => await runInVm(find(handle), argv, opts),

    files: {
      maxChunkBytes: AgentLimits.maxFileBytes,
      read: async (handle, path, range) => await find(handle).agent.files.read(path, range),
      write: async (handle, path, data, opts = {}) => { await find(handle).agent.files.write(path, data, { mkdirs: true, ...opts }) },
      list: async (handle, path) => await find(handle).agent.files.list(path),
      stat: async (handle, path, opts) => await find(handle).agent.files.stat(path, opts),
      mkdir: async (handle, path, opts) => { await find(handle).agent.files.mkdir(path, opts) },
      remove: async (handle, path, opts) => { await find(handle).agent.files.remove(path, opts) },
      rename: async (handle, from, to) => { await find(handle).agent.files.rename(from, to) },
      symlink: async (handle, path, target) => { await find(handle).agent.files.symlink(path, target) }
    },

    async kill (handle) {
      goneListeners.delete(handle.id)
      const entry = live.get(handle.id)
      if (entry === undefined) return
      live.delete(handle.id)
      await reclaim(entry)
    },

    onGone (handle, listener) {
      goneListeners.set(handle.id, listener)
      // It may have ended before anyone listened.
      if (live.get(handle.id)?.agent.closed === true) queueMicrotask(() => gone(handle.id, 'the VM ended (QEMU exited or the guest powered off)'))
      return () => { if (goneListeners.get(handle.id) === listener) goneListeners.delete(handle.id) }
    },

    cachedLayers () {
      return store.cached()
    },

    async close () {
      closed = true
      await Promise.all([...live.values()].map(reclaim))
      live.clear()
      await rmdir(runDir).catch(() => {}) // only when empty
      await options.cgroups?.close?.().catch(() => {})
    },

    status () {
      return { live: live.size, accel }
    },

    vm: (handle) => live.get(handle.id)?.vm,

    guest
  }
}
