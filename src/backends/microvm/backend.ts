/**
 * The microvm backend: each sandbox is a QEMU `-M microvm` guest running warren's agent as its
 * PID 1, its root the sandbox's EROFS layers (read-only virtio-blk disks: whole files, or the
 * layer server's FUSE files) under a tmpfs of `diskMiB`, reached through the same agent client as
 * containers over a virtio serial port. QEMU runs in its own cgroups and outlives the node agent:
 * every VM is journaled from the moment QEMU runs, so a restarted node re-adopts the ones that
 * still answer (QMP, then the agent) and reclaims the rest.
 *
 * Creation: a warm pool of ready VMs per shape (layer stack and limits) hands one out when it has
 * it; otherwise a VM is restored from the shape's template (a VM booted once and saved, vm-launch.ts)
 * or, the first time and where templates do not work, booted. Pause stops the vCPUs (the guest's
 * commands frozen first), snapshot streams the guest's tree into an EROFS layer (snapshot.ts),
 * egress relays the guest's 127.0.0.1:3128 over a second serial port to the sandbox's proxy.
 */
import { nanoid } from 'nanoid'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readdir, rm, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { LayerStore } from '../../images/index.js'
import type { SandboxCgroup } from '../container/backend.js'
import { connectAgent, type AgentClient } from '../container/agent-client.js'
import { commandsAtFirstResume, resumableCommands } from '../container/exec.js'
import { agentSandboxFiles } from '../container/agent-files.js'
import { createSandboxEvents } from '../sandbox-events.js'
import { createEgressRouting, EGRESS_ENV } from '../container/egress.js'
import { Journal } from '../container/journal.js'
import { isAlive } from '../container/proc.js'
import { WarmPool } from '../container/warm-pool.js'
import type { AdoptedExec, AdoptedSandbox, MemoryState, SandboxHandle, SandboxSpec } from '../types.js'
import type { MicrovmBackend, MicrovmBackendOptions } from './backend-types.js'
import { MicrovmDefaults } from './defaults.js'
import { openVmEgress, startEgressMux, type EgressMux, type VmEgress } from './egress-mux.js'
import { guestOomKills, reattachInVm, runInVm, type VmExecTarget } from './exec.js'
import { prepareGuest, type GuestImage } from './guest/index.js'
import { destroyVm, type LaunchedVm } from './launcher.js'
import { machineOf, saveMemorySnapshot, STATE_SUFFIX } from './memory-snapshot.js'
import { createVmPause, freezeCommands, type VmPauseControl } from './pause.js'
import { chooseAccel, defaultCpu } from './accel.js'
import { hostTscKhz } from './qemu-args.js'
import { holdQemuUser } from './qemu-jail.js'
import { poolKey, vmLimits, type VmShape } from './shape.js'
import { cutVmSnapshot } from './snapshot.js'
import { createTemplateStore } from './templates.js'
import { createVmLauncher, type MadeVm } from './vm-launch.js'
import { setVcpus, vmRunState } from './vm-state.js'
import { createAgentWatchdog } from './agent-watchdog.js'

export const MicrovmBackendDefaults = { defaultLayers: ['busybox'] }

interface Live extends VmExecTarget {
  vm: LaunchedVm
  refs: string[]
  cgroup: SandboxCgroup | undefined
  pause: VmPauseControl
  /** The host's end of its egress port: connected for every VM (see egress-mux.ts). */
  mux: EgressMux
  /** Its proxy, when its spec allows egress. */
  egress: VmEgress | undefined
  record: JournalEntry
  /** Adopted paused: its resumable commands are listed at its first resume. */
  unlisted?: boolean
}

/** `claimed`: handed out (an unclaimed record is a boot a crash interrupted, or a pooled VM). */
interface JournalEntry { vm: LaunchedVm, meta: unknown, claimed: boolean, refs: string[], paused?: boolean, egress?: string[] }

const VM_ENDED = 'the VM ended (QEMU exited or the guest powered off)'

/** Codes an agent connection ends with when what the guest sent was not the agent's protocol. */
const BROKE_PROTOCOL: ReadonlySet<string> = new Set([ErrorCodes.PROTOCOL_VIOLATION, ErrorCodes.MALFORMED_FRAME, ErrorCodes.FRAME_TOO_LARGE, ErrorCodes.UNKNOWN_FRAME_KIND])

/** Why a VM's agent connection ended, as its sandbox's end tells it. */
function endCause (agent: AgentClient): string {
  const why = agent.endReason
  if (why === undefined) return VM_ENDED
  // The guest (its root is the tenant's) broke the protocol: the node cut it off and ends the VM.
  if (BROKE_PROTOCOL.has(why.code)) return `the guest's agent broke the protocol (${why.message}); the VM was ended`
  if (why.code === ErrorCodes.PEER_UNRESPONSIVE) return `the guest's agent stopped answering (${why.message}); the VM was ended`
  return VM_ENDED
}

export type { MicrovmBackend, MicrovmBackendOptions } from './backend-types.js'

/** A microvm backend (see the file's head); nothing starts until the first create or adopt. */
export function createMicrovmBackend (options: MicrovmBackendOptions): MicrovmBackend {
  const runDir = options.runDir ?? MicrovmDefaults.runDir
  const qemuPath = MicrovmDefaults.qemuPath
  // Probed once per process: /dev/kvm may be there and KVM still refuse the host's CPU model (accel.ts).
  const { accel, cpu, kvmRefused } = options.accel !== undefined ? { accel: options.accel, cpu: defaultCpu(options.accel), kvmRefused: undefined } : chooseAccel(qemuPath)
  if (kvmRefused !== undefined) options.onProgress?.(`KVM is there but QEMU cannot use it (${kvmRefused}): VMs run under TCG`)
  const store = new LayerStore(options.layersDir ?? join(options.dataDir, 'layers'), options.layerSource, options.lazy)
  const journal = new Journal<JournalEntry>(join(options.dataDir, 'journal'))
  const egressRouting = createEgressRouting(options.egress)
  // Made even when templates are off: adopt clears what a previous process left in its directory.
  const templateDir = options.templateDir ?? `${runDir}-templates`
  const templateStore = createTemplateStore(templateDir, MicrovmDefaults.maxTemplates, MicrovmDefaults.templateMemoryMiB)
  const templates = options.templates === false ? undefined : templateStore
  // Memory snapshots made shareable: a store of their own, so a tenant forking many snapshots
  // neither evicts the shapes' templates nor pins more than its bound of guest RAM.
  const memoryStore = createTemplateStore(`${templateDir}-memory`, MicrovmDefaults.maxMemoryTemplates, MicrovmDefaults.templateMemoryMiB)
  const memoryTemplates = options.templates === false ? undefined : memoryStore
  const live = new Map<string, Live>()
  const watchdog = createAgentWatchdog(() => [...live.values()].map((e) => ({ agent: e.agent, paused: e.pause.paused, running: async () => await vmRunState(e.vm.qmpSocket) === 'running' })))
  /** Who hears when a VM ends by itself (Backend.onGone) and of its egress (Backend.onEgress). */
  const events = createSandboxEvents()
  const gone = events.gone
  const egressOf = events.egressOf
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
    const work = guestWork
    return work.then((g) => {
      // Gone from a guest dir another node shares (it removes builds unused for a week): made again.
      if (existsSync(g.initrd)) return g
      if (guestWork === work) guestWork = undefined
      return guest()
    })
  }

  const launcher = createVmLauncher({
    runDir, accel, cpu, tscKhz: accel === 'tcg' ? hostTscKhz() : undefined, extraCmdline: options.extraCmdline, cgroups: options.cgroups, guest, templates, memoryTemplates,
    journal: (vm, refs) => journal.write(vm.id, { vm, meta: undefined, claimed: false, refs }),
    unjournal: (id) => journal.remove(id),
    onTemplateFailure: (err) => options.onProgress?.(`a VM template failed, booting instead: ${(err as Error).message}`)
  })

  /** The agent's connection ending, other than by kill or close, means the VM ended, or is ended now. */
  const watch = (id: string, entry: Live): void => {
    void entry.agent.ended.then(() => { if (!closed && live.get(id) === entry) gone(id, endCause(entry.agent)) })
  }

  /**
   * The backend's record of a made VM, its egress port connected: its pause control writes its
   * flag to the journal. The VM is ended if its port cannot be reached.
   */
  async function entryOf (made: Pick<MadeVm, 'vm' | 'agent' | 'cgroup'>, refs: string[], record: JournalEntry, paused: boolean): Promise<Live> {
    const mux = await startEgressMux(made.vm.egressSocket).catch(async (err: unknown) => {
      await reclaim({ ...record, vm: made.vm })
      await made.agent.close().catch(() => {})
      await made.cgroup?.remove().catch(() => {})
      throw err
    })
    const entry: Live = {
      vm: made.vm, agent: made.agent, cgroup: made.cgroup, refs, env: {}, oomSeen: 0, mux, egress: undefined, record,
      pause: createVmPause({ qmpSocket: made.vm.qmpSocket, agent: made.agent }, paused, (p) => {
        entry.record = { ...entry.record, paused: p }
        if (live.has(made.vm.id)) journal.write(made.vm.id, entry.record)
      })
    }
    const group = made.cgroup
    if (group !== undefined) entry.hostOomKills = () => group.oomKills()
    entry.running = async () => !entry.pause.paused && await vmRunState(made.vm.qmpSocket).catch(() => undefined) === 'running'
    return entry
  }

  /** Ends a VM and removes all it had on the host: process, sockets, cgroup, journal record. */
  async function reclaim (entry: Live | JournalEntry): Promise<void> {
    if ('agent' in entry) {
      await entry.agent.close().catch(() => {})
      await entry.egress?.close().catch(() => {})
      entry.mux.close()
    }
    const ended = await destroyVm(entry.vm).then(() => true, () => false)
    const cgroup = 'agent' in entry ? entry.cgroup : options.cgroups?.open?.(entry.vm.id)
    await cgroup?.remove().catch(() => {})
    // A journal entry's layers are settled by the layer server's sync at the end of adopt.
    if ('agent' in entry) for (const ref of entry.refs) await store.release(ref).catch(() => {})
    // A QEMU that outlived SIGKILL keeps its record: the next adopt tries again and holds its user.
    if (ended) journal.remove(entry.vm.id)
  }

  /** The spec's layer references and what its limits give a VM (nothing resolved yet). */
  function plainShape (spec: SandboxSpec): Omit<VmShape, 'layers'> {
    const refs = spec.layers !== undefined && spec.layers.length > 0 ? spec.layers : options.defaultLayers ?? MicrovmBackendDefaults.defaultLayers
    return { refs, ...vmLimits(spec.limits) }
  }
  /** The shape with its layers' files; each resolve counts one user of an on-demand layer. */
  async function resolved (plain: Omit<VmShape, 'layers'>): Promise<VmShape> {
    return { ...plain, layers: await Promise.all(plain.refs.map(async (r) => await store.resolve(r))) }
  }

  const pool = new WarmPool<Live>({
    create: async (key) => {
      // A pooled VM counts as a user of its layers like any other (released when it ends).
      const shape = await resolved(JSON.parse(key) as Omit<VmShape, 'layers'>)
      const refs = shape.refs
      const id = `p${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`
      try {
        const made = await launcher.make(id, shape, id)
        const record: JournalEntry = { vm: made.vm, meta: undefined, claimed: false, refs }
        journal.write(id, record)
        const e = await entryOf(made, refs, record, false)
        e.oomSeen = await guestOomKills(e.agent)
        return e
      } catch (err) {
        for (const ref of refs) await store.release(ref).catch(() => {})
        throw err
      }
    },
    destroy: reclaim,
    min: options.pool?.min ?? 0,
    max: options.pool?.max ?? MicrovmDefaults.poolMax,
    maxTotal: options.pool?.maxTotal ?? MicrovmDefaults.poolMaxTotal,
    onError: (err) => options.onProgress?.(`a pooled VM failed to start: ${(err as Error).message}`)
  })

  /**
   * The state file of a memory snapshot, from this node's store or the blob store, once the
   * shape is the machine it was saved from (QEMU would refuse another).
   * @throws WARREN_ERR_INVALID_ARGUMENT naming the limit that differs; WARREN_ERR_UNSUPPORTED
   *   naming `memory` when this node's accelerator, CPU model or QEMU release is not the saved one's
   */
  async function memoryState (m: MemoryState, shape: VmShape): Promise<string> {
    const here = await machineOf(accel, cpu, qemuPath)
    if (m.machine !== undefined && m.machine !== here) {
      throw createError(ErrorCodes.UNSUPPORTED, `a memory snapshot saved on ${m.machine} does not load on this node's ${here}`, { field: 'memory', saved: m.machine, here })
    }
    if (shape.vcpus !== m.vcpus) throw createError(ErrorCodes.INVALID_ARGUMENT, `a memory snapshot of a ${m.vcpus}-vCPU VM restores with ${m.vcpus} vCPUs, not ${shape.vcpus}`, { field: 'limits.cpus' })
    if (shape.memoryMiB !== m.memoryMiB) throw createError(ErrorCodes.INVALID_ARGUMENT, `a memory snapshot of a ${m.memoryMiB} MiB VM restores with ${m.memoryMiB} MiB, not ${shape.memoryMiB}`, { field: 'limits.memoryMiB' })
    return await store.blobFile(m.state, STATE_SUFFIX, 'memory')
  }

  function find (handle: SandboxHandle): Live {
    const entry = live.get(handle.id)
    if (entry === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the sandbox's VM has ended`)
    return entry
  }
  /** A live VM that is not paused: its vCPUs are stopped, so a request would wait until resume. */
  function running (handle: SandboxHandle): Live {
    const entry = find(handle)
    if (entry.pause.paused) throw createError(ErrorCodes.SANDBOX_PAUSED, `VM ${handle.id} is paused: resume it first`, { id: handle.id, state: 'paused' })
    return entry
  }
  /** A pause or snapshot that failed because the VM was killed meanwhile says so. */
  const goneOr = (handle: SandboxHandle, err: unknown): unknown =>
    live.has(handle.id) ? err : createError(ErrorCodes.SANDBOX_GONE, `the sandbox's VM has ended`)

  /** A VM the old agent left running, its agent connected again, and its resumable commands (none when adopted paused). */
  async function adoptOne (entry: JournalEntry): Promise<{ live: Live, execs: AdoptedExec[] }> {
    // A paused VM whose memory was saved is stopped as 'postmigrate'.
    const raw = await vmRunState(entry.vm.qmpSocket)
    const state = raw === 'postmigrate' ? 'paused' : raw
    // Stopped and journaled paused: a pause. Any other mix is a pause or resume a crash cut short: it runs.
    const paused = state === 'paused' && entry.paused === true
    if (state === 'paused' && !paused) await setVcpus(entry.vm.qmpSocket, true)
    let agent: AgentClient | undefined
    try {
      agent = await connectAgent(entry.vm.agentSocket)
      // The guest's agent hears the old connection hang up and opens its port again for this one.
      if (!paused) await agent.ping(MicrovmDefaults.adoptPingMs)
      if (!paused && entry.paused === true) await freezeCommands(agent, false).catch(() => {})
      const record: JournalEntry = { ...entry, paused }
      if (entry.paused === true && !paused) journal.write(entry.vm.id, record)
      const e = await entryOf({ vm: entry.vm, agent, cgroup: options.cgroups?.open?.(entry.vm.id) }, entry.refs, record, paused)
      if (!paused) e.oomSeen = await guestOomKills(agent)
      // Its resumable commands ran on in the guest without us: the node takes them up (`reattach`).
      const execs = paused ? [] : await resumableCommands(agent)
      if (entry.egress !== undefined && entry.egress.length > 0) {
        e.egress = await openVmEgress(entry.vm, e.mux, entry.egress, egressRouting, egressOf(entry.vm.id))
        e.env = { ...EGRESS_ENV }
      }
      if (paused) e.unlisted = true
      return { live: e, execs }
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
    resumableExecs: true,
    snapshots: true,
    memorySnapshots: true,

    async create (spec = {}) {
      if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the microvm backend is closed', { reason: 'closed' })
      const shape = await resolved(plainShape(spec))
      const key = poolKey(shape)
      const name = spec.hostname ?? spec.id
      let entry: Live | undefined
      let warm = false
      try {
        // A memory snapshot's VM goes on from its saved instant: never a pooled one.
        if (spec.memory === undefined) entry = pool.claim(key)
        warm = entry !== undefined
        if (entry !== undefined) {
          // A claimed VM already counts as a user of its layers: this create's count goes back.
          for (const ref of shape.refs) await store.release(ref)
          // Named, reseeded and given the time as it is handed out (it may have waited a while).
          await entry.agent.setIdentity({ ...(name !== undefined ? { name } : {}), seed: randomBytes(MicrovmDefaults.seedBytes), timeMs: Date.now() })
        } else {
          const id = spec.id ?? `v${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`
          const made = spec.memory !== undefined
            ? await launcher.fromMemory(id, shape, name ?? id, await memoryState(spec.memory, shape))
            : await launcher.make(id, shape, name ?? id)
          entry = await entryOf(made, shape.refs, { vm: made.vm, meta: undefined, claimed: false, refs: shape.refs }, false)
          entry.oomSeen = await guestOomKills(entry.agent)
        }
        const { vm } = entry
        const allow = [...new Set(spec.egress ?? [])].sort()
        if (allow.length > 0) entry.egress = await openVmEgress(vm, entry.mux, allow, egressRouting, egressOf(vm.id))
        // Commands find the way out where the usual tools look for it.
        entry.env = entry.egress !== undefined ? { ...EGRESS_ENV, ...spec.env } : spec.env ?? {}
        if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the microvm backend closed during the create', { reason: 'closed' })
        entry.record = { vm, meta: spec.meta, claimed: true, refs: entry.refs, ...(allow.length > 0 ? { egress: allow } : {}) }
        journal.write(vm.id, entry.record)
        live.set(vm.id, entry)
        watch(vm.id, entry)
        return { id: vm.id, kind: 'microvm', ...(warm ? { warm } : {}) }
      } catch (err) {
        if (entry !== undefined) await reclaim(entry)
        else for (const ref of shape.refs) await store.release(ref).catch(() => {})
        throw err
      }
    },

    async adopt () {
      const adopted: AdoptedSandbox[] = []
      const keep = new Set<string>()
      const entries = journal.readAll()
      // Users whose QEMU still runs are held first, by that VM: no new VM is given one, and a
      // dead record naming the same user (left behind, or copied) does not end that VM with it.
      for (const entry of entries) {
        if (entry.vm.uid !== undefined && await isAlive(entry.vm.pid, entry.vm.startTime)) holdQemuUser(entry.vm.uid, entry.vm.dir)
      }
      // Several at once, each agent given `adoptPingMs` to answer: a guest that stopped its agent
      // delays the node's start by that, not by a request timeout per VM.
      const adoptOrReclaim = async (entry: JournalEntry): Promise<void> => {
        if (entry.claimed && await isAlive(entry.vm.pid, entry.vm.startTime)) {
          try {
            const { live: e, execs } = await adoptOne(entry)
            live.set(entry.vm.id, e)
            watch(entry.vm.id, e)
            adopted.push({ handle: { id: entry.vm.id, kind: 'microvm' }, meta: entry.meta, ...(e.pause.paused ? { paused: true } : {}), ...(execs.length > 0 ? { execs } : {}) })
            keep.add(entry.vm.id)
            return
          } catch { /* no monitor or no agent answering: reclaimed below */ }
        }
        await reclaim(entry) // dead, unreachable, a pooled VM, or a boot a crash interrupted
      }
      const queue = [...entries]
      await Promise.all(Array.from({ length: Math.min(MicrovmDefaults.adoptConcurrency, queue.length) }, async () => {
        for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) await adoptOrReclaim(entry)
      }))
      // Directories of boots that crashed before their journal record was written.
      for (const name of await readdir(runDir).catch(() => [] as string[])) {
        if (!keep.has(name)) await rm(join(runDir, name), { recursive: true, force: true }).catch(() => {})
      }
      // Staging copies and half-built images of snapshots the old agent was cutting.
      for (const name of await readdir(store.dir).catch(() => [] as string[])) {
        if (name.startsWith('.stage-') || name.startsWith('.build-') || name.startsWith('.mem-')) await rm(join(store.dir, name), { recursive: true, force: true }).catch(() => {})
      }
      // Templates of the old agent: this one makes its own (adopted VMs keep the pages they map).
      await templateStore.clear().catch(() => {})
      await memoryStore.clear().catch(() => {})
      // A group that will not go is no reason to keep the node from starting.
      await options.cgroups?.reclaimOrphans?.(keep).catch(() => {})
      // The layer server outlived the old agent: it learns which of its layers' users survived.
      if (options.lazy !== undefined) {
        const users: Record<string, number> = {}
        for (const e of live.values()) for (const r of e.refs) if (r.startsWith('sha256:')) users[r] = (users[r] ?? 0) + 1
        await options.lazy.sync(users).catch(() => {})
      }
      return adopted
    },

    exec: async (handle, argv, opts) => await runInVm(running(handle), argv, opts),

    reattach: async (handle, tag, opts) => await reattachInVm(running(handle), tag, opts),

    files: agentSandboxFiles((handle) => running(handle).agent),

    async pause (handle) {
      await find(handle).pause.pause().catch((err: unknown) => { throw goneOr(handle, err) })
    },

    async resume (handle) {
      const entry = find(handle)
      await entry.pause.resume().catch((err: unknown) => { throw goneOr(handle, err) })
      return await commandsAtFirstResume(entry)
    },

    async snapshot (handle, opts = {}) {
      const entry = find(handle)
      try {
        let made
        if (opts.memory === true) {
          const machine = await machineOf(accel, cpu, qemuPath)
          made = await saveMemorySnapshot({ id: handle.id, qmpSocket: entry.vm.qmpSocket, dir: entry.vm.dir, uid: entry.vm.uid, vcpus: entry.vm.vcpus, memoryMiB: entry.vm.memoryMiB, machine }, store.dir, { whileStopped: entry.pause.whileStopped })
        } else {
          const g = await guest()
          const mountPoints = g.modulesDisk !== undefined ? [`lib/modules/${g.release}`] : []
          made = await cutVmSnapshot(entry.agent, handle.id, store.dir, { flatten: opts.flatten === true, whileFrozen: entry.pause.whileFrozen, mountPoints, ...(entry.vm.diskMiB !== undefined ? { diskMiB: entry.vm.diskMiB } : {}) })
        }
        // Each snapshot is a file in the store: it stays under its bound.
        store.added()
        return made
      } catch (err) {
        throw goneOr(handle, err)
      }
    },

    onEgress: (handle, listener) => events.onEgress(handle.id, listener),

    async kill (handle) {
      events.forget(handle.id)
      const entry = live.get(handle.id)
      if (entry === undefined) return
      live.delete(handle.id)
      await reclaim(entry)
    },

    // It may have ended before anyone listened.
    onGone: (handle, listener) => {
      const agent = live.get(handle.id)?.agent
      return events.onGone(handle.id, listener, agent?.closed === true, agent !== undefined ? endCause(agent) : VM_ENDED)
    },

    layersLost () {
      for (const [id, entry] of live) {
        const lost = entry.refs.filter((r) => store.onDemand(r))
        if (lost.length > 0) gone(id, `the layer server died: its layers (${lost.join(', ')}) can no longer be read`)
      }
    },

    cachedLayers () {
      return store.cached()
    },

    machine: async () => await machineOf(accel, cpu, qemuPath),

    async prewarm (spec, n) {
      pool.prewarm(poolKey(plainShape(spec)), n)
    },

    async close () {
      closed = true
      watchdog.stop()
      await pool.close()
      await Promise.all([...live.values()].map(reclaim))
      live.clear()
      await templateStore.close().catch(() => {})
      await memoryStore.close().catch(() => {})
      await rmdir(runDir).catch(() => {}) // only when empty
      await options.cgroups?.close?.().catch(() => {})
    },

    status () {
      return { live: live.size, pooled: pool.size, templates: templates?.size ?? 0, memoryTemplates: memoryTemplates?.size ?? 0, accel }
    },

    vm: (handle) => live.get(handle.id)?.vm,

    guest
  }
}
