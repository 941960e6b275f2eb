/**
 * The container backend: each sandbox is a `warren-init` launched into fresh namespaces over an
 * overlay of EROFS layers, inside its own cgroup, reached through its agent's Unix socket.
 *
 * Sandboxes come from an adaptive warm pool per (layer stack, limits) when one is ready, else
 * are launched on the spot (3–5 ms here). Every sandbox is journaled before it is handed out,
 * so a restarted node adopts the ones still alive (`adopt`) and reclaims the rest.
 *
 * With a cgroup provider whose groups freeze, sandboxes pause, resume and snapshot
 * (freeze-control.ts, snapshot.ts); a paused sandbox is journaled as such and adopted paused.
 */
import { nanoid } from 'nanoid'
import { readdir, rm, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { LayerStore, type LayerService, type LayerSource } from '../../images/index.js'
import { createEgressRouting, EGRESS_ENV, startEgressProxy, type EgressProxy, type EgressProxyOptions } from './egress.js'
import type { AdoptedSandbox, Backend, ExecOptions, ExecResult, SandboxHandle, SandboxSpec } from '../types.js'
import { connectAgent, type AgentClient } from './agent-client.js'
import { agentSandboxFiles } from './agent-files.js'
import { createSandboxEvents } from '../sandbox-events.js'
import type { CgroupProvider, SandboxCgroup } from './cgroup-types.js'
import { ContainerDefaults } from './defaults.js'
import { Journal } from './journal.js'
import { createFreezeControl, noFreezer, type FreezeControl } from './freeze-control.js'
import { checkHostname, destroySandbox, launchSandbox, type LaunchedSandbox } from './launcher.js'
import { commandsAtFirstResume, reattachCommand, resumableCommands, runCommand } from './exec.js'
import { cutSnapshot } from './snapshot.js'
import { isAlive } from './proc.js'
import { WarmPool } from './warm-pool.js'

type Limits = NonNullable<SandboxSpec['limits']>

export type { CgroupProvider, SandboxCgroup } from './cgroup-types.js'

export interface ContainerBackendOptions {
  /** Holds the journal, and the layer store unless `layersDir` puts it elsewhere. */
  dataDir: string
  /** Where layers (and the debootstrap trees they are built from) are cached. */
  layersDir?: string
  /** Where layers named by digest are fetched from when not cached here. */
  layerSource?: LayerSource
  /** Load layers on demand (only the chunks read) instead of pulling them whole. */
  lazy?: LayerService
  runDir?: string
  cgroups?: CgroupProvider
  pool?: { min?: number, max?: number, maxTotal?: number }
  /** Default layer stack when a spec names none. */
  defaultLayers?: string[]
  /** How egress proxies resolve names, and the operator's pinned names (see EgressProxyOptions). */
  egress?: EgressProxyOptions
}

export const ContainerBackendDefaults = { defaultLayers: ['busybox'], poolMax: 8, poolMaxTotal: 64 }

interface Live {
  /** The layer references it was made from (released when it ends). */
  refs: string[]
  /** Its way out, when its spec allows egress. */
  egress: EgressProxy | undefined
  launched: LaunchedSandbox
  agent: AgentClient
  env: Record<string, string>
  cgroup: SandboxCgroup | undefined
  freezer: FreezeControl
  /** What was journaled for it (rewritten when it pauses or resumes). */
  record: JournalEntry
  /** Adopted paused: its resumable commands are listed at its first resume. */
  unlisted?: boolean
}

/**
 * `refs`: the layers it uses, so a restarted agent knows which layers adopted sandboxes still need.
 * `paused`: set before it is frozen by a pause and cleared after it is thawed.
 */
interface JournalEntry { launched: LaunchedSandbox, meta: unknown, claimed: boolean, refs?: string[], egress?: string[], paused?: boolean }

/** How a pooled sandbox is described: its layer references and files, and limits (the pool key is this, as JSON). */
interface Shape { refs: string[], layers: string[], limits: Limits, egress: string[] }

const NO_LIMITS: Limits = { cpus: 0, memoryMiB: 0, diskMiB: ContainerDefaults.diskMiB, pids: 0 }

export interface ContainerBackend extends Backend {
  /** Sandboxes alive, and ready ones in the pools. */
  status (): { live: number, pooled: number }
  /** Keeps `n` ready sandboxes of this spec's shape. */
  prewarm (spec: SandboxSpec, n: number): Promise<void>
  /** The layer server died: sandboxes reading layers it served have lost them, and end. */
  layersLost (): void
}

export function createContainerBackend (options: ContainerBackendOptions): ContainerBackend {
  const runDir = options.runDir ?? ContainerDefaults.runDir
  const egressRouting = createEgressRouting(options.egress)
  const store = new LayerStore(options.layersDir ?? join(options.dataDir, 'layers'), options.layerSource, options.lazy)
  const journal = new Journal<JournalEntry>(join(options.dataDir, 'journal'))
  const live = new Map<string, Live>()
  let closed = false
  /** Who hears when a sandbox ends by itself (Backend.onGone) and of its egress (Backend.onEgress); the proxies call `egressOf(id)`. */
  const events = createSandboxEvents()
  const gone = events.gone
  const egressOf = events.egressOf
  /**
   * A live sandbox's agent connection ending, other than by kill or close, means its init died:
   * killed for memory when its cgroup counts an OOM kill (its files count: the writable layer is
   * memory), else of its own accord.
   */
  const watchInit = (id: string, entry: Live): void => {
    void entry.agent.ended.then(async () => {
      if (closed || live.get(id) !== entry) return
      const oom = await entry.cgroup?.oomKills().then((n) => n > 0, () => false) ?? false
      if (closed || live.get(id) !== entry) return
      if (oom) gone(id, 'the sandbox ran out of memory and the kernel killed its init (limits.memoryMiB; its files take memory too)', 'oom')
      else gone(id, 'the sandbox\'s init process ended')
    })
  }

  /** The freezer control of a sandbox; its paused flag goes to the sandbox's journal record. */
  function freezerOf (id: string, cgroup: SandboxCgroup | undefined, paused: boolean, record: () => JournalEntry): FreezeControl {
    return createFreezeControl(id, cgroup, paused, (p) => {
      const r = record()
      r.paused = p
      if (live.has(id)) journal.write(id, r)
    })
  }

  async function launch (id: string, shape: Shape, hostname?: string): Promise<Live> {
    // Every sandbox gets its group when there is a provider, limits or not: the freezer is what pauses it.
    const cgroup = options.cgroups !== undefined ? await options.cgroups.create(id, shape.limits) : undefined
    let launched: LaunchedSandbox | undefined
    let egress: EgressProxy | undefined
    try {
      launched = await launchSandbox({
        id, layers: shape.layers, diskMiB: shape.limits.diskMiB, runDir, egress: shape.egress.length > 0,
        ...(hostname !== undefined ? { hostname } : {}), ...(cgroup !== undefined ? { cgroups: cgroup.dirs } : {})
      })
      // Journaled before anything else can fail: a crash from here on leaves a record to reclaim.
      const record: JournalEntry = { launched, meta: undefined, claimed: false, refs: shape.refs, egress: shape.egress }
      journal.write(id, record)
      egress = await openEgress(launched, shape.egress)
      const agent = await connectAgent(launched.socketPath)
      const entry: Live = { refs: shape.refs, egress, launched, agent, env: {}, cgroup, record, freezer: freezerOf(id, cgroup, false, () => entry.record) }
      return entry
    } catch (err) {
      await egress?.close().catch(() => {})
      if (launched !== undefined) { await destroySandbox(launched).catch(() => {}); journal.remove(id) }
      await cgroup?.remove().catch(() => {})
      throw err
    }
  }

  async function reclaim (entry: Live | JournalEntry): Promise<void> {
    const launched = entry.launched
    if ('agent' in entry) {
      await entry.agent.close().catch(() => {})
      await entry.egress?.close().catch(() => {})
    }
    // A paused sandbox's kill lands once it is thawed (v1 freezer), so it is thawed right after the SIGKILL.
    const cgroup = 'agent' in entry ? entry.cgroup : options.cgroups?.open?.(launched.id)
    await destroySandbox(launched, { ...(cgroup?.thaw !== undefined ? { afterKill: cgroup.thaw.bind(cgroup) } : {}) }).catch(() => {})
    if ('cgroup' in entry) await entry.cgroup?.remove().catch(() => {})
    // A journal entry's layers are settled by the sync at the end of adopt, not one by one.
    if ('agent' in entry) for (const ref of entry.refs) await store.release(ref).catch(() => {})
    journal.remove(launched.id)
  }

  const pool = new WarmPool<Live>({
    create: async (key) => {
      // A pooled sandbox counts as a user of its layers like any other (released when it ends).
      const shape = JSON.parse(key) as Shape
      await Promise.all(shape.refs.map((r) => store.resolve(r)))
      return await launch(`p${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`, shape)
    },
    destroy: reclaim,
    min: options.pool?.min ?? 0,
    max: options.pool?.max ?? ContainerBackendDefaults.poolMax,
    maxTotal: options.pool?.maxTotal ?? ContainerBackendDefaults.poolMaxTotal
  })

  async function shapeOf (spec: SandboxSpec): Promise<Shape> {
    const refs = spec.layers !== undefined && spec.layers.length > 0 ? spec.layers : options.defaultLayers ?? ContainerBackendDefaults.defaultLayers
    // The allow-list is part of the shape: pooled sandboxes are made with their way out (or none).
    const egress = [...new Set(spec.egress ?? [])].sort()
    return { refs, layers: await Promise.all(refs.map((r) => store.resolve(r))), limits: spec.limits ?? NO_LIMITS, egress }
  }

  /** The sandbox's egress proxy, listening in the directory its launcher bound into it. */
  async function openEgress (launched: LaunchedSandbox, allow: readonly string[]): Promise<EgressProxy | undefined> {
    if (allow.length === 0 || launched.egressDir === undefined) return undefined
    return await startEgressProxy(join(launched.egressDir, 'proxy.sock'), allow, egressRouting, egressOf(launched.id))
  }

  function find (handle: SandboxHandle): Live {
    const entry = live.get(handle.id)
    if (entry === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `the sandbox's container has ended`)
    return entry
  }

  /** A live sandbox that is not paused: its agent is frozen, so a request would wait until resume. */
  function running (handle: SandboxHandle): Live {
    const entry = find(handle)
    if (entry.freezer.paused) throw createError(ErrorCodes.SANDBOX_PAUSED, `container ${handle.id} is paused: resume it first`, { id: handle.id, state: 'paused' })
    return entry
  }

  /** A pause or snapshot that failed because the sandbox was killed meanwhile says so. */
  const goneOr = (handle: SandboxHandle, err: unknown): unknown =>
    live.has(handle.id) ? err : createError(ErrorCodes.SANDBOX_GONE, `the sandbox's container has ended`)

  return {
    kind: 'container',
    interactiveStdin: true,
    outputCredit: true,
    commandIdentity: true,
    terminal: true,
    resumableExecs: true,
    snapshots: options.cgroups?.freezes === true,

    async create (spec = {}) {
      if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the container backend is closed', { reason: 'closed' })
      // A container has no machine state to restore: a memory snapshot is a VM's alone.
      if (spec.memory !== undefined) throw createError(ErrorCodes.UNSUPPORTED, 'the container backend cannot start from a memory snapshot', { field: 'memory', backend: 'container' })
      if (spec.hostname !== undefined) checkHostname(spec.hostname)
      const shape = await shapeOf(spec)
      const key = JSON.stringify(shape)
      const pooled = pool.claim(key)
      // A claimed sandbox already counts as a user of its layers: this create's count goes back.
      if (pooled !== undefined) for (const ref of shape.refs) await store.release(ref)
      const entry = pooled ?? await launch(spec.id ?? `c${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`, shape, spec.hostname)
      // A pooled sandbox was named before anyone knew whose it would be: it takes its name now.
      // Not awaited: the agent handles one connection's requests in order, so every later
      // command already sees the new name, and the claim costs no extra round trip.
      const name = spec.hostname ?? spec.id
      if (pooled !== undefined && name !== undefined) entry.agent.setHostname(name).catch(() => {})
      // Commands find the way out where the usual tools look for it.
      entry.env = entry.egress !== undefined ? { ...EGRESS_ENV, ...spec.env } : spec.env ?? {}
      entry.record = { launched: entry.launched, meta: spec.meta, claimed: true, refs: entry.refs, egress: shape.egress }
      journal.write(entry.launched.id, entry.record)
      live.set(entry.launched.id, entry)
      watchInit(entry.launched.id, entry)
      return { id: entry.launched.id, kind: 'container', ...(pooled !== undefined ? { warm: true } : {}) }
    },

    async adopt () {
      const adopted: AdoptedSandbox[] = []
      const keep = new Set<string>()
      for (const entry of journal.readAll()) {
        const { launched } = entry
        if (entry.claimed && await isAlive(launched.pid, launched.startTime)) {
          try {
            const cgroup = options.cgroups?.open?.(launched.id)
            const frozen = await cgroup?.frozen?.() === true
            // A freeze nobody asked to keep (a snapshot the old agent was cutting) ends with that agent.
            if (frozen && entry.paused !== true) await cgroup?.thaw?.()
            const paused = frozen && entry.paused === true
            const agent = await connectAgent(launched.socketPath)
            // A frozen agent cannot answer; its socket still accepts (the kernel queues the connection).
            if (!paused) await agent.ping()
            // Its resumable commands ran on without us: the node takes them up (`reattach`).
            const execs = paused ? [] : await resumableCommands(agent)
            // The proxy lived in the old agent: a new one takes its socket's place in the same directory.
            const egress = await openEgress(launched, entry.egress ?? [])
            const record: JournalEntry = { ...entry, paused }
            if (entry.paused === true && !paused) journal.write(launched.id, record)
            const adoptedEntry: Live = {
              refs: entry.refs ?? [], egress, launched, agent, env: egress !== undefined ? { ...EGRESS_ENV } : {}, cgroup, record, unlisted: paused,
              freezer: freezerOf(launched.id, cgroup, paused, () => adoptedEntry.record)
            }
            live.set(launched.id, adoptedEntry)
            watchInit(launched.id, adoptedEntry)
            adopted.push({ handle: { id: launched.id, kind: 'container' }, meta: entry.meta, ...(paused ? { paused: true } : {}), ...(execs.length > 0 ? { execs } : {}) })
            keep.add(launched.id)
            continue
          } catch { /* unreachable agent: reclaimed below */ }
        }
        await reclaim(entry) // dead, unreachable, or an unclaimed pool sandbox
      }
      // Directories of launches that crashed before their journal record was written.
      for (const name of await readdir(runDir).catch(() => [] as string[])) {
        if (!keep.has(name)) await rm(join(runDir, name), { recursive: true, force: true }).catch(() => {})
      }
      // Staging copies and half-built images of snapshots the old agent was cutting.
      for (const name of await readdir(store.dir).catch(() => [] as string[])) {
        if (name.startsWith('.stage-') || name.startsWith('.build-')) await rm(join(store.dir, name), { recursive: true, force: true }).catch(() => {})
      }
      await options.cgroups?.reclaimOrphans?.(keep)
      // The layer server outlived the old agent: it learns which of its layers' users survived.
      if (options.lazy !== undefined) {
        const users: Record<string, number> = {}
        for (const e of live.values()) for (const r of e.refs) if (r.startsWith('sha256:')) users[r] = (users[r] ?? 0) + 1
        await options.lazy.sync(users).catch(() => {})
      }
      return adopted
    },

    async exec (handle, argv, opts: ExecOptions = {}): Promise<ExecResult> {
      const entry = running(handle)
      return await runCommand(entry, argv, opts)
    },

    async reattach (handle, tag, opts) {
      return await reattachCommand(running(handle), tag, opts)
    },

    files: agentSandboxFiles((handle) => running(handle).agent),

    async pause (handle) {
      await find(handle).freezer.pause().catch((err: unknown) => { throw goneOr(handle, err) })
    },

    async resume (handle) {
      const entry = find(handle)
      await entry.freezer.resume().catch((err: unknown) => { throw goneOr(handle, err) })
      return await commandsAtFirstResume(entry)
    },

    async snapshot (handle, opts = {}) {
      const entry = find(handle)
      if (opts.memory === true) throw createError(ErrorCodes.UNSUPPORTED, 'the container backend cannot snapshot memory', { field: 'memory', backend: 'container' })
      if (entry.cgroup?.freeze === undefined) throw noFreezer(handle.id)
      try {
        const layer = await cutSnapshot(entry.launched, store.dir, { flatten: opts.flatten === true, whileFrozen: entry.freezer.whileFrozen })
        store.added()
        return layer
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

    // Its init may have died before anyone listened.
    onGone: (handle, listener) => events.onGone(handle.id, listener, live.get(handle.id)?.agent.closed === true, 'the sandbox\'s init process ended'),

    layersLost () {
      for (const [id, entry] of live) {
        const lost = entry.refs.filter((r) => store.onDemand(r))
        if (lost.length > 0) gone(id, `the layer server died: its layers (${lost.join(', ')}) can no longer be read`)
      }
    },

    async close () {
      closed = true
      await pool.close()
      await Promise.all([...live.values()].map(reclaim))
      live.clear()
      await rmdir(runDir).catch(() => {}) // only when empty: a sibling process may share it
      await options.cgroups?.close?.().catch(() => {})
    },

    status () {
      return { live: live.size, pooled: pool.size }
    },

    cachedLayers () {
      return store.cached()
    },

    async prewarm (spec, n) {
      pool.prewarm(JSON.stringify(await shapeOf(spec)), n)
    }
  }
}
