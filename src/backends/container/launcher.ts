/**
 * Creating and destroying a container sandbox on the host: runs `warren-init launch`, which
 * builds the sandbox and leaves its PID 1 (the agent) running, and later kills that PID 1 (the
 * kernel then kills everything in its pid namespace) and removes what the host side made.
 *
 * A `LaunchedSandbox` is plain data, so a node can journal it and destroy (or re-adopt) the
 * sandbox after a restart.
 */
import { spawn } from 'node:child_process'
import { access, mkdir, rm, rmdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { ContainerDefaults } from './defaults.js'
import { isAlive, processInfo } from './proc.js'

/** What `launchSandbox` needs. */
export interface LaunchSandboxOptions {
  /** Unique among the node's sandboxes; the hostname inside unless `hostname` is given. 1-63 of [A-Za-z0-9._-]. */
  id: string
  /** The hostname inside (default `id`). 1-63 of [A-Za-z0-9._-]. */
  hostname?: string
  /** EROFS image files, bottom layer first. */
  layers: readonly string[]
  /** Size of the writable layer (default `ContainerDefaults.diskMiB`); 0: unlimited, on the host disk. */
  diskMiB?: number
  /**
   * Cgroup directories to put the sandbox in, one per hierarchy (v2: one; v1: one per
   * controller). Missing ones are created here and removed by `destroySandbox`.
   */
  cgroups?: readonly string[]
  /** Parent of the sandbox's host directory (default `ContainerDefaults.runDir`). */
  runDir?: string
  /** The warren-init binary (default `ContainerDefaults.agentPath`). */
  agentPath?: string
  /** Default `ContainerDefaults.launchTimeoutMs`. */
  timeoutMs?: number
  /** Give the sandbox a way out through an egress proxy (its socket goes in `egressDir`). */
  egress?: boolean
}

/** A running sandbox, as plain data (journal it as JSON). */
export interface LaunchedSandbox {
  readonly id: string
  /** Host PID of the sandbox's PID 1 (the agent). */
  readonly pid: number
  /** Start time of that process (clock ticks since boot), telling it apart from a later one with the same PID. */
  readonly startTime: number
  /** The agent's Unix socket. */
  readonly socketPath: string
  /** The sandbox's host directory: holds the socket and the upper directory. */
  readonly dir: string
  /** With egress: the host directory bound into the sandbox for the egress proxy's socket. */
  readonly egressDir?: string
  /** The mount point of the writable layer (empty as seen from the host when `diskMiB` > 0). */
  readonly upperDir: string
  /** Cgroup directories the sandbox runs in. */
  readonly cgroups: readonly string[]
  /** Those of them that launch created (and destroy removes). */
  readonly createdCgroups: readonly string[]
  /** From spawning the launcher to the agent reporting ready. */
  readonly launchMs: number
}

const ID_PATTERN = /^[A-Za-z0-9._-]{1,63}$/

/**
 * The descriptor number at which a sandbox's agent keeps the directory holding its writable
 * layer (`u`, the overlay upper; `w`, its work dir): WARREN_UPPER_FD in agent/sandbox.h.
 */
export const UPPER_FD = 5

/**
 * Where the host reads a running sandbox's writable layer (the overlay's upper directory): through
 * its agent's descriptor, the only way there once its old root is detached (for a tmpfs upper
 * no host path reaches it; with `diskMiB` 0 this is `upperDir/u` itself).
 */
export function upperPath (sb: LaunchedSandbox): string {
  return `/proc/${sb.pid}/fd/${UPPER_FD}/u`
}
// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH = 107

/**
 * Builds a sandbox and returns once its agent accepts connections.
 * @throws WARREN_ERR_INVALID_ARGUMENT (bad id, path too long), WARREN_ERR_NOT_FOUND (a layer is
 *   missing), WARREN_ERR_TIMEOUT, WARREN_ERR_BACKEND_UNAVAILABLE (the launcher failed; `details.message` says why)
 */
export async function launchSandbox (opts: LaunchSandboxOptions): Promise<LaunchedSandbox> {
  const started = performance.now()
  if (!ID_PATTERN.test(opts.id)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `sandbox id ${JSON.stringify(opts.id)} must be 1-63 of [A-Za-z0-9._-]`)
  }
  if (opts.hostname !== undefined) checkHostname(opts.hostname)
  if (opts.layers.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'a sandbox needs at least one layer')
  for (const layer of opts.layers) {
    await access(layer).catch(() => { throw createError(ErrorCodes.NOT_FOUND, `layer ${layer} does not exist`, { layer }) })
  }
  const diskMiB = opts.diskMiB ?? ContainerDefaults.diskMiB
  if (!Number.isInteger(diskMiB) || diskMiB < 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `diskMiB must be a whole number >= 0, not ${diskMiB}`)
  const dir = join(opts.runDir ?? ContainerDefaults.runDir, opts.id)
  const socketPath = join(dir, 'agent.sock')
  const upperDir = join(dir, 'upper')
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `socket path ${socketPath} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter runDir`)
  }
  const cgroups = [...(opts.cgroups ?? [])]
  const createdCgroups: string[] = []
  const undo = async (): Promise<void> => {
    await rm(dir, { recursive: true, force: true }).catch(() => {})
    for (const cg of createdCgroups) await rmdir(cg).catch(() => {})
  }
  try {
    await mkdir(upperDir, { recursive: true })
    for (const cg of cgroups) {
      const existed = await stat(cg).then(() => true, () => false)
      if (!existed) { await mkdir(cg, { recursive: true }); createdCgroups.push(cg) }
    }
    const args = ['launch', '--id', opts.id, '--upper', upperDir, '--socket', socketPath, '--disk-mib', String(diskMiB)]
    if (opts.hostname !== undefined) args.push('--hostname', opts.hostname)
    const egressDir = opts.egress === true ? join(dir, 'egress') : undefined
    if (egressDir !== undefined) { await mkdir(egressDir, { recursive: true, mode: 0o755 }); args.push('--egress', egressDir) }
    for (const layer of opts.layers) args.push('--layer', layer)
    for (const cg of cgroups) args.push('--cgroup', cg)
    const pid = await runLauncher(opts.agentPath ?? ContainerDefaults.agentPath, args, opts.timeoutMs ?? ContainerDefaults.launchTimeoutMs)
    const info = await processInfo(pid)
    if (info === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `sandbox ${opts.id} (pid ${pid}) died right after start`, { reason: 'launch-failed' })
    return { id: opts.id, pid, startTime: info.startTime, socketPath, dir, upperDir, cgroups, createdCgroups, launchMs: performance.now() - started, ...(egressDir !== undefined ? { egressDir } : {}) }
  } catch (err) {
    await undo()
    throw err
  }
}

/**
 * Checks a hostname for a sandbox: 1-63 of [A-Za-z0-9._-] (what the agent accepts).
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `hostname`
 */
export function checkHostname (hostname: unknown): void {
  if (typeof hostname !== 'string' || !ID_PATTERN.test(hostname)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `hostname ${JSON.stringify(hostname)} must be 1-63 of [A-Za-z0-9._-]`, { field: 'hostname' })
  }
}

/** Runs the launcher; resolves with the sandbox's PID once it is ready. */
function runLauncher (agentPath: string, args: string[], timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    // An empty environment: the sandbox's PID 1 is this process's child and keeps its environment,
    // which must not carry the node's variables into the sandbox.
    const child = spawn(agentPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: {} })
    let out = ''
    let errText = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s })
    child.stderr.setEncoding('utf8').on('data', (s: string) => { if (errText.length < 4096) errText += s })
    // Killing the launcher kills a sandbox still being set up (it has PDEATHSIG until ready).
    let timedOut = false
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL') }, timeoutMs)
    child.once('error', (err) => {
      clearTimeout(timer)
      reject(createError(ErrorCodes.BACKEND_UNAVAILABLE, `cannot run ${agentPath}: ${err.message}`, { reason: 'no-agent', agentPath }))
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      const pid = Number.parseInt(out, 10)
      if (code === 0 && Number.isInteger(pid) && pid > 0) { resolve(pid); return }
      if (timedOut) {
        reject(createError(ErrorCodes.TIMEOUT, `sandbox launch took over ${timeoutMs} ms`, { timeoutMs }))
        return
      }
      const message = errText.trim().replace(/^warren-init: /, '') || `launcher exited with ${code ?? signal}`
      reject(createError(ErrorCodes.BACKEND_UNAVAILABLE, `sandbox launch failed: ${message}`, { reason: 'launch-failed', message }))
    })
  })
}

/**
 * Ends a sandbox and removes its host-side traces: SIGKILLs its PID 1 (the kernel kills the rest
 * of its pid namespace, and its mounts go with its mount namespace), waits until it is gone,
 * then removes its directory (socket, upper dir) and the cgroups launch created. Idempotent:
 * a sandbox already gone only has its leftovers removed.
 * @param opts.afterKill runs right after the SIGKILL: a paused sandbox's freezer is thawed there
 *   (tasks frozen in a v1 freezer die only once thawed; their kill is already pending)
 * @throws WARREN_ERR_TIMEOUT when the processes or the cgroups outlast `timeoutMs`
 */
export async function destroySandbox (sb: LaunchedSandbox, opts: { timeoutMs?: number, afterKill?: () => Promise<void> } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? ContainerDefaults.destroyTimeoutMs)
  if (await isAlive(sb.pid, sb.startTime)) {
    try { process.kill(sb.pid, 'SIGKILL') } catch { /* ended meanwhile */ }
  }
  await opts.afterKill?.().catch(() => {})
  while (await isAlive(sb.pid, sb.startTime)) {
    if (Date.now() > deadline) throw createError(ErrorCodes.TIMEOUT, `sandbox ${sb.id} (pid ${sb.pid}) outlived SIGKILL`, { id: sb.id, pid: sb.pid })
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  await rm(sb.dir, { recursive: true, force: true })
  for (const cg of sb.createdCgroups) {
    // A cgroup empties a moment after its last task dies (EBUSY until then).
    for (;;) {
      try {
        await rmdir(cg)
        break
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (code === 'ENOENT') break
        if (code !== 'EBUSY' || Date.now() > deadline) {
          throw createError(ErrorCodes.TIMEOUT, `cgroup ${cg} of sandbox ${sb.id} cannot be removed: ${code}`, { id: sb.id, cgroup: cg })
        }
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    }
  }
}
