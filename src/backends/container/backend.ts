/**
 * The container backend: each sandbox is a `warren-init` launched into fresh namespaces over an
 * overlay of EROFS layers, inside its own cgroup, reached through its agent's Unix socket.
 *
 * Sandboxes come from an adaptive warm pool per (layer stack, limits) when one is ready, else
 * are launched on the spot (3–5 ms here). Every sandbox is journaled before it is handed out,
 * so a restarted node adopts the ones still alive (`adopt`) and reclaims the rest.
 */
import { nanoid } from 'nanoid'
import { readdir, rm, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { LayerStore, type LayerService, type LayerSource } from '../../images/index.js'
import { createEgressRouting, EgressDefaults, startEgressProxy, type EgressProxy, type EgressProxyOptions } from './egress.js'
import type { AdoptedSandbox, Backend, ExecOptions, ExecResult, SandboxHandle, SandboxSpec } from '../types.js'
import { connectAgent, type AgentClient } from './agent-client.js'
import { ContainerDefaults } from './defaults.js'
import { AgentLimits } from './protocol.js'
import { Journal } from './journal.js'
import { destroySandbox, launchSandbox, type LaunchedSandbox } from './launcher.js'
import { isAlive } from './proc.js'
import { resolveUser, UserDefaults } from './users.js'
import { WarmPool } from './warm-pool.js'

/** The agent's cap for output nobody capped: beyond any command's reach (the agent counts in 64 bits). */
const UNCAPPED_OUTPUT = Number.MAX_SAFE_INTEGER

type Limits = NonNullable<SandboxSpec['limits']>

/** The groups of one sandbox. */
export interface SandboxCgroup {
  /** One directory per hierarchy; the launcher joins them. */
  dirs: string[]
  /** OOM kills inside the group so far. */
  oomKills (): Promise<number>
  /** Kills what is left in the group and removes it. */
  remove (): Promise<void>
}

/** Puts a sandbox under resource limits; the cgroups module provides the real one. */
export interface CgroupProvider {
  /** Creates the groups of one sandbox with its limits. */
  create (id: string, limits: Limits): Promise<SandboxCgroup>
  /** The groups of a sandbox made before (by a previous agent), if they exist. */
  open? (id: string): SandboxCgroup | undefined
  /** Reclaims groups of sandboxes that are no longer journaled. */
  reclaimOrphans? (keep: Set<string>): Promise<void>
  /** Removes the provider's own (empty) parent groups. */
  close? (): Promise<void>
}

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
  pool?: { min?: number, max?: number }
  /** Default layer stack when a spec names none. */
  defaultLayers?: string[]
  /** How egress proxies resolve names, and the operator's pinned names (see EgressProxyOptions). */
  egress?: EgressProxyOptions
}

export const ContainerBackendDefaults = { defaultLayers: ['busybox'], poolMax: 8 }

/** What commands of a sandbox with egress see: the relay to its proxy, under every usual name. */
const EGRESS_ENV: Record<string, string> = {
  HTTP_PROXY: EgressDefaults.proxyUrl, HTTPS_PROXY: EgressDefaults.proxyUrl, http_proxy: EgressDefaults.proxyUrl, https_proxy: EgressDefaults.proxyUrl,
  NO_PROXY: 'localhost,127.0.0.1', no_proxy: 'localhost,127.0.0.1'
}

interface Live {
  /** The layer references it was made from (released when it ends). */
  refs: string[]
  /** Its way out, when its spec allows egress. */
  egress: EgressProxy | undefined
  launched: LaunchedSandbox
  agent: AgentClient
  env: Record<string, string>
  cgroup: SandboxCgroup | undefined
}

/** `refs`: the layers it uses, so a restarted agent knows which layers adopted sandboxes still need. */
interface JournalEntry { launched: LaunchedSandbox, meta: unknown, claimed: boolean, refs?: string[], egress?: string[] }

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
  /** Who hears when a sandbox ends by itself (see Backend.onGone). */
  const goneListeners = new Map<string, (message: string) => void>()
  const gone = (id: string, message: string): void => {
    const listener = goneListeners.get(id)
    goneListeners.delete(id)
    listener?.(message)
  }
  /** A live sandbox's agent connection ending, other than by kill or close, means its init died. */
  const watchInit = (id: string, entry: Live): void => {
    void entry.agent.ended.then(() => { if (!closed && live.get(id) === entry) gone(id, 'the sandbox\'s init process ended') })
  }

  async function launch (id: string, shape: Shape): Promise<Live> {
    const cgroup = options.cgroups !== undefined && (shape.limits.memoryMiB > 0 || shape.limits.cpus > 0 || shape.limits.pids > 0)
      ? await options.cgroups.create(id, shape.limits)
      : undefined
    let launched: LaunchedSandbox | undefined
    let egress: EgressProxy | undefined
    try {
      launched = await launchSandbox({ id, layers: shape.layers, diskMiB: shape.limits.diskMiB, runDir, egress: shape.egress.length > 0, ...(cgroup !== undefined ? { cgroups: cgroup.dirs } : {}) })
      // Journaled before anything else can fail: a crash from here on leaves a record to reclaim.
      journal.write(id, { launched, meta: undefined, claimed: false, refs: shape.refs, egress: shape.egress })
      egress = await openEgress(launched, shape.egress)
      const agent = await connectAgent(launched.socketPath)
      return { refs: shape.refs, egress, launched, agent, env: {}, cgroup }
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
    await destroySandbox(launched).catch(() => {})
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
    max: options.pool?.max ?? ContainerBackendDefaults.poolMax
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
    return await startEgressProxy(join(launched.egressDir, 'proxy.sock'), allow, egressRouting)
  }

  function find (handle: SandboxHandle): Live {
    const entry = live.get(handle.id)
    if (entry === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `container ${handle.id} is gone`, { id: handle.id })
    return entry
  }

  return {
    kind: 'container',
    interactiveStdin: true,
    outputCredit: true,
    commandIdentity: true,
    terminal: true,

    async create (spec = {}) {
      if (closed) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the container backend is closed', { reason: 'closed' })
      const shape = await shapeOf(spec)
      const key = JSON.stringify(shape)
      const pooled = pool.claim(key)
      // A claimed sandbox already counts as a user of its layers: this create's count goes back.
      if (pooled !== undefined) for (const ref of shape.refs) await store.release(ref)
      const entry = pooled ?? await launch(spec.id ?? `c${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`, shape)
      // A pooled sandbox was named before anyone knew whose it would be: it takes its id now.
      // Not awaited: the agent handles one connection's requests in order, so every later
      // command already sees the new name, and the claim costs no extra round trip.
      if (pooled !== undefined && spec.id !== undefined) entry.agent.setHostname(spec.id).catch(() => {})
      // Commands find the way out where the usual tools look for it.
      entry.env = entry.egress !== undefined ? { ...EGRESS_ENV, ...spec.env } : spec.env ?? {}
      journal.write(entry.launched.id, { launched: entry.launched, meta: spec.meta, claimed: true, refs: entry.refs, egress: shape.egress })
      live.set(entry.launched.id, entry)
      watchInit(entry.launched.id, entry)
      return { id: entry.launched.id, kind: 'container' }
    },

    async adopt () {
      const adopted: AdoptedSandbox[] = []
      const keep = new Set<string>()
      for (const entry of journal.readAll()) {
        const { launched } = entry
        if (entry.claimed && await isAlive(launched.pid, launched.startTime)) {
          try {
            const agent = await connectAgent(launched.socketPath)
            await agent.ping()
            // The proxy lived in the old agent: a new one takes its socket's place in the same directory.
            const egress = await openEgress(launched, entry.egress ?? [])
            const adoptedEntry: Live = { refs: entry.refs ?? [], egress, launched, agent, env: egress !== undefined ? { ...EGRESS_ENV } : {}, cgroup: options.cgroups?.open?.(launched.id) }
            live.set(launched.id, adoptedEntry)
            watchInit(launched.id, adoptedEntry)
            adopted.push({ handle: { id: launched.id, kind: 'container' }, meta: entry.meta })
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
      const entry = find(handle)
      const started = performance.now()
      try {
        const who = opts.user !== undefined
          ? await resolveUser(opts.user, async () => await entry.agent.files.read('/etc/passwd', { length: UserDefaults.maxPasswdBytes }))
          : undefined
        // With credit the consumer bounds what is held of the output, so none is cut unless asked.
        const maxOutputBytes = opts.maxOutputBytes ?? (opts.credit !== undefined ? UNCAPPED_OUTPUT : undefined)
        const execution = entry.agent.startExec(argv, {
          env: { ...(who?.home !== undefined ? { HOME: who.home } : {}), ...entry.env, ...opts.env },
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
        const oom = r.signal === 9 && !r.timedOut && !r.killed && entry.cgroup !== undefined && await entry.cgroup.oomKills() > 0
        const reason = r.timedOut ? 'timeout' as const : oom ? 'oom' as const : r.killed ? 'killed' as const : undefined
        return {
          exitCode: r.timedOut ? 124 : r.exitCode,
          durationMs: r.durationMs,
          truncated: r.truncated,
          ...(reason !== undefined ? { reason } : {})
        }
      } catch (err) {
        if (isWarrenError(err) && err.code !== ErrorCodes.CONNECTION_CLOSED) throw err
        // The agent went away mid-command: out of memory, or the sandbox was killed.
        const oom = entry.cgroup !== undefined && await entry.cgroup.oomKills().catch(() => 0) > 0
        return { exitCode: 137, durationMs: performance.now() - started, truncated: false, reason: oom ? 'oom' : 'killed', message: 'the sandbox ended during the command' }
      }
    },

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
      // Its init may have died before anyone listened.
      if (live.get(handle.id)?.agent.closed === true) queueMicrotask(() => gone(handle.id, 'the sandbox\'s init process ended'))
      return () => { if (goneListeners.get(handle.id) === listener) goneListeners.delete(handle.id) }
    },

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
