/**
 * Starting and ending one microVM on the host. QEMU is started inside the VM's cgroups (a shell
 * joins them, then execs QEMU, so every page and thread is charged from the first), in a session
 * of its own, is up once its monitor answers, jailed (qemu-jail.ts: its own empty root and host
 * user from then on), and outlives the node agent; `LaunchedVm` is plain data, so a node can journal it and end or
 * re-adopt the VM after a restart.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, open, readFile, rm, type FileHandle } from 'node:fs/promises'
import { createConnection } from 'node:net'
import { join } from 'node:path'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { connectAgent, type AgentClient } from '../container/agent-client.js'
import { isAlive, processInfo } from '../container/proc.js'
import { MicrovmDefaults } from './defaults.js'
import type { GuestImage } from './guest/index.js'
import { connectQmp } from './qmp.js'
import { qemuArgs, type VmPlan } from './qemu-args.js'
import { RAM_FD, RAM_PATH, type GuestRam } from './guest-ram.js'
import { canJail, endQemuUser, jailCommand, jailDir, jailPath, mayEndQemuUser, releaseQemuUser, takeQemuUser } from './qemu-jail.js'
import { loadVmState, saveVmState, STATE_FD, STATE_SOCKET, stateTimeoutMs } from './vm-state.js'

/** What `launchVm` needs. */
export interface LaunchVmOptions {
  /** Unique among the node's VMs: 1-63 of [A-Za-z0-9._-]. */
  id: string
  /** The hostname inside (default the id). */
  hostname?: string
  /** EROFS image files, bottom layer first. */
  layers: readonly string[]
  guest: GuestImage
  vcpus: number
  memoryMiB: number
  diskMiB: number
  pids: number
  accel: 'kvm' | 'tcg'
  /** QEMU's `-cpu` (see `VmPlan.cpu`). */
  cpu?: string
  tscKhz?: number
  /** Cgroup directories QEMU runs in, one per hierarchy. */
  cgroups?: readonly string[]
  runDir?: string
  qemuPath?: string
  bootTimeoutMs?: number
  /** Kernel parameters added for this VM (e.g. `warren.debug=1`). */
  extraCmdline?: string
  /** Called as soon as QEMU runs, before the boot is waited for: journal it here. */
  onStarted?: (vm: LaunchedVm) => void
  /**
   * Guest RAM held by the node (guest-ram.ts): shared, the VM writes it (a template being made);
   * private, it is a saved VM's, copied on write, and must be sealed.
   */
  ram?: { of: GuestRam, share: boolean }
  /**
   * Start from this saved state (vm-state.ts) instead of booting: a template's, `ram` then the
   * saved RAM, private; without `ram`, a memory snapshot's (the RAM in the stream).
   */
  restoreFrom?: string
  /**
   * The saved state is a running guest's that had its host connected (a memory snapshot's made
   * shareable): once it runs, it is made to hear that host hang up (vm-state.ts), and that is
   * waited for, so the node's connection starts a fresh stream. (A memory snapshot's own stream,
   * RAM in it, hears it without help.)
   */
  restoreHangsUp?: boolean
}

/** A running VM, as plain data (journal it as JSON). */
export interface LaunchedVm {
  readonly id: string
  /** QEMU's PID and start time (clock ticks since boot), telling it apart from a later process with the PID. */
  readonly pid: number
  readonly startTime: number
  /** The VM's host directory: its sockets and pid file, and the empty `root/` its QEMU is jailed in. */
  readonly dir: string
  /** The host user its QEMU runs as once set up (qemu-jail.ts); undefined: not jailed (a node that is not root, or a record from before jails). */
  readonly uid?: number
  readonly agentSocket: string
  /** The guest's egress relay (the `warren.egress` port), multiplexed (egress-mux.ts). */
  readonly egressSocket: string
  readonly qmpSocket: string
  readonly accel: 'kvm' | 'tcg'
  readonly vcpus: number
  readonly memoryMiB: number
  /** The size of its writable layer (a guest tmpfs; 0: half the guest's memory); absent in records from before it was kept. */
  readonly diskMiB?: number
  /** From starting QEMU to the agent answering; 0 until then. */
  readonly bootMs: number
}

const ID_PATTERN = /^[A-Za-z0-9._-]{1,63}$/
// sockaddr_un.sun_path is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH = 107
// Joins each cgroup named after the count, then becomes QEMU: `sh -c SCRIPT sh N procs... qemu args...`.
const JOIN_AND_EXEC = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"'

/**
 * Starts a VM (booting it, or from a saved state) and returns once its agent answers.
 * @throws WARREN_ERR_INVALID_ARGUMENT (bad id, path too long), WARREN_ERR_TIMEOUT (no answer in
 *   `bootTimeoutMs`), WARREN_ERR_BACKEND_UNAVAILABLE (QEMU refused or the guest died; `details.console`
 *   holds the console's last lines)
 */
export async function launchVm (opts: LaunchVmOptions): Promise<{ vm: LaunchedVm, agent: AgentClient }> {
  const started = performance.now()
  if (opts.restoreFrom !== undefined && opts.ram?.share === true) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, 'a restored VM maps its saved RAM private', { field: 'ram' })
  }
  const { vm, plan } = await startVm(opts)
  try {
    if (opts.restoreFrom !== undefined) {
      const ram = opts.ram === undefined ? 'in-stream' : 'shared-file'
      await loadVmState(plan.qmpSocket, { ram, timeoutMs: stateTimeoutMs(ram, opts.memoryMiB), ...(opts.restoreHangsUp === true ? { hangUpVia: plan.agentSocket } : {}) })
    }
    const console = readConsole(plan.consoleSocket)
    try {
      const agent = await waitForAgent(vm, opts.bootTimeoutMs ?? MicrovmDefaults.bootTimeoutMs, console.tail)
      return { vm: { ...vm, bootMs: performance.now() - started }, agent }
    } finally {
      console.close()
    }
  } catch (err) {
    await destroyVm(vm).catch(() => {})
    throw err
  }
}

/**
 * Makes a memory snapshot's RAM shareable: a QEMU whose RAM is `ram` (shared: the memfd is
 * the RAM) loads `stateFile` (RAM in the stream) without running a vCPU, and saves its state
 * again without the RAM into `savedStateFile`, then ends. VMs started from that (`restoreFrom`
 * with `ram` private and `restoreHangsUp`, once it is sealed) share its pages as a template's
 * restores do. (Seen here: the port's host state did not survive this second save, so a VM
 * restored from it is made to hear the hang-up, see `restoreHangsUp`.)
 */
export async function reshareMemoryState (opts: Omit<LaunchVmOptions, 'restoreFrom' | 'ram' | 'restoreHangsUp'> & { stateFile: string, ram: GuestRam, savedStateFile: string }): Promise<void> {
  const { vm, plan } = await startVm({ ...opts, ram: { of: opts.ram, share: true }, restoreFrom: opts.stateFile })
  try {
    await loadVmState(plan.qmpSocket, { ram: 'in-stream', timeoutMs: stateTimeoutMs('in-stream', opts.memoryMiB), run: false })
    await saveVmState(vm, opts.savedStateFile, { ram: 'shared-file' })
  } finally {
    await destroyVm(vm).catch(() => {})
  }
}

/** Starts QEMU for `opts` (journaled through `onStarted` as soon as it runs); nothing waited for inside. */
async function startVm (opts: LaunchVmOptions): Promise<{ vm: LaunchedVm, plan: VmPlan }> {
  if (!ID_PATTERN.test(opts.id)) throw createError(ErrorCodes.INVALID_ARGUMENT, `VM id ${JSON.stringify(opts.id)} must be 1-63 of [A-Za-z0-9._-]`, { field: 'id' })
  const hostname = opts.hostname ?? opts.id
  if (!ID_PATTERN.test(hostname)) throw createError(ErrorCodes.INVALID_ARGUMENT, `hostname ${JSON.stringify(hostname)} must be 1-63 of [A-Za-z0-9._-]`, { field: 'hostname' })
  if (opts.layers.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'a VM needs at least one layer', { field: 'layers' })
  // A page another VM could still write must never be mapped into this one.
  if (opts.ram !== undefined && !opts.ram.share && !opts.ram.of.sealed) throw createError(ErrorCodes.INVALID_ARGUMENT, 'a VM maps saved RAM only once it is sealed', { field: 'ram' })
  const dir = join(opts.runDir ?? MicrovmDefaults.runDir, opts.id)
  const sockets = { agentSocket: join(dir, 'agent.sock'), egressSocket: join(dir, 'egress.sock'), qmpSocket: join(dir, 'qmp.sock'), consoleSocket: join(dir, 'con.sock') }
  for (const s of [...Object.values(sockets), jailPath({ dir }, STATE_SOCKET).host]) {
    if (Buffer.byteLength(s) > MAX_SOCKET_PATH) throw createError(ErrorCodes.INVALID_ARGUMENT, `socket path ${s} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter runDir`, { field: 'runDir' })
  }
  // The directory comes first: a user's lease names it (qemu-jail.ts).
  await rm(dir, { recursive: true, force: true })
  await mkdir(dir, { recursive: true, mode: 0o700 })
  let uid: number | undefined
  try {
    uid = canJail() ? takeQemuUser(dir) : undefined
  } catch (err) {
    await rm(dir, { recursive: true, force: true }).catch(() => {})
    throw err
  }
  const plan: VmPlan = {
    id: opts.id,
    hostname,
    layers: opts.layers,
    kernel: opts.guest.kernel,
    initrd: opts.guest.initrd,
    ...(opts.guest.modulesDisk !== undefined ? { modulesDisk: opts.guest.modulesDisk } : {}),
    vcpus: opts.vcpus,
    memoryMiB: opts.memoryMiB,
    diskMiB: opts.diskMiB,
    pids: opts.pids,
    accel: opts.accel,
    ...(opts.cpu !== undefined ? { cpu: opts.cpu } : {}),
    ...(opts.tscKhz !== undefined ? { tscKhz: opts.tscKhz } : {}),
    ...sockets,
    pidFile: join(dir, 'qemu.pid'),
    ...(opts.extraCmdline !== undefined ? { extraCmdline: opts.extraCmdline } : {}),
    ...(opts.ram !== undefined ? { memoryFile: { path: RAM_PATH, share: opts.ram.share } } : {}),
    ...(opts.restoreFrom !== undefined ? { incoming: true } : {}),
    ...(uid !== undefined ? { jail: { dir: jailDir(dir), uid } } : {})
  }
  let vm: LaunchedVm | undefined
  let state: FileHandle | undefined
  try {
    // The jail: empty, root's, searchable only (its QEMU finds the one socket a save puts there).
    await mkdir(jailDir(dir), { mode: 0o711 })
    // Opened here, as root, and handed over: a jailed QEMU could not open it itself.
    if (opts.restoreFrom !== undefined) state = await open(opts.restoreFrom, 'r')
    const qemu = opts.qemuPath ?? MicrovmDefaults.qemuPath
    const [cmd, args] = uid !== undefined ? jailCommand(qemu, qemuArgs(plan)) : [qemu, qemuArgs(plan)]
    await startQemu(cmd, args, opts.cgroups ?? [], { state: state?.fd, ram: opts.ram?.of.fd }, plan.qmpSocket)
    const pid = Number.parseInt(await readFile(plan.pidFile, 'utf8'), 10)
    const info = Number.isInteger(pid) && pid > 0 ? await processInfo(pid) : undefined
    if (info === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `QEMU of VM ${opts.id} died right after start`, { reason: 'launch-failed' })
    vm = { id: opts.id, pid, startTime: info.startTime, dir, ...(uid !== undefined ? { uid } : {}), agentSocket: plan.agentSocket, egressSocket: plan.egressSocket, qmpSocket: plan.qmpSocket, accel: opts.accel, vcpus: opts.vcpus, memoryMiB: opts.memoryMiB, diskMiB: opts.diskMiB, bootMs: 0 }
    opts.onStarted?.(vm)
    return { vm, plan }
  } catch (err) {
    if (vm !== undefined) await destroyVm(vm).catch(() => {})
    else {
      releaseQemuUser(uid, dir)
      await rm(dir, { recursive: true, force: true }).catch(() => {})
    }
    throw err
  } finally {
    await state?.close()
  }
}

/**
 * Runs `qemu` (QEMU, or what execs it: `jailCommand`), joining `cgroups` first, with the node's
 * descriptors `fds.state` as its `STATE_FD` and `fds.ram` as its `RAM_FD` when given, in a
 * session of its own (so it outlives the node agent and a terminal's Ctrl-C); resolves once its
 * monitor answers at `qmpSocket`, which QEMU does only from its main loop: set up and jailed.
 *
 * QEMU does not daemonize: a fork after its seccomp filter is in place is what `spawn=deny`
 * forbids (qemu-args.ts). Its stderr is read until it is up (for why it refused), then let go:
 * what it writes later fails with EPIPE (QEMU ignores SIGPIPE), so a guest that makes QEMU
 * complain fills no pipe and no disk.
 */
async function startQemu (qemu: string, args: string[], cgroups: readonly string[], fds: { state: number | undefined, ram: number | undefined }, qmpSocket: string): Promise<void> {
  const [cmd, argv] = cgroups.length > 0
    ? ['/bin/sh', ['-c', JOIN_AND_EXEC, 'sh', String(cgroups.length), ...cgroups.map((d) => join(d, 'cgroup.procs')), qemu, ...args]]
    : [qemu, args]
  // An empty environment: nothing of the node's reaches QEMU.
  const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'ignore', 'pipe', 'ignore', 'ignore']
  if (fds.state !== undefined) stdio[STATE_FD] = fds.state
  if (fds.ram !== undefined) stdio[RAM_FD] = fds.ram
  const child = spawn(cmd, argv, { stdio, env: {}, detached: true })
  let errText = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => { if (errText.length < 4096) errText += s })
  let ended: { code: number | null, signal: NodeJS.Signals | null, error?: Error } | undefined
  // 'close' comes once stderr is read to its end as well: the refusal's whole text.
  const closed = new Promise<void>((resolve) => {
    child.once('error', (error) => { ended ??= { code: null, signal: null, error }; resolve() })
    child.once('close', (code, signal) => { ended ??= { code, signal }; resolve() })
  })
  const deadline = Date.now() + MicrovmDefaults.startTimeoutMs
  try {
    for (;;) {
      if (ended !== undefined) break
      const left = deadline - Date.now()
      if (left <= 0) {
        child.kill('SIGKILL')
        await closed
        throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `QEMU did not come up within ${MicrovmDefaults.startTimeoutMs} ms${errText.trim() !== '' ? `: ${errText.trim()}` : ''}`, { reason: 'launch-failed' })
      }
      // Nothing listens before QEMU made its sockets (looked for often: a start is ~0.2 s);
      // once there, the connection waits for QEMU's greeting, which comes from its main loop.
      if (!existsSync(qmpSocket)) {
        await Promise.race([pause(2), closed])
        continue
      }
      const qmp = await connectQmp(qmpSocket, left).catch(() => undefined)
      if (qmp !== undefined) {
        const up = await qmp.execute('query-status').then(() => true, () => false)
        qmp.close()
        if (up) {
          child.stderr?.destroy()
          child.unref()
          return
        }
      }
      await Promise.race([pause(20), closed])
    }
  } catch (err) {
    if (ended === undefined) child.kill('SIGKILL')
    throw err
  }
  await closed
  if (ended.error !== undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `cannot run ${qemu}: ${ended.error.message}`, { reason: 'no-qemu' })
  const message = errText.trim() || (ended.code === 125 ? 'joining its cgroups failed' : `QEMU exited with ${ended.code ?? ended.signal}`)
  throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `QEMU refused to start: ${message}`, { reason: 'launch-failed', message })
}

/** Keeps the last bytes the guest writes to its console, while connected. */
function readConsole (path: string): { tail: () => string, close: () => void } {
  let kept = ''
  const socket = createConnection({ path })
  socket.on('error', () => {})
  socket.setEncoding('utf8')
  socket.on('data', (s: string) => { kept = (kept + s).slice(-MicrovmDefaults.consoleTailBytes) })
  return { tail: () => kept.trim(), close: () => socket.destroy() }
}

/** Connects to the agent's port and waits for its first answer, or for QEMU to end, or the deadline. */
async function waitForAgent (vm: LaunchedVm, timeoutMs: number, consoleTail: () => string): Promise<AgentClient> {
  const deadline = Date.now() + timeoutMs
  const failed = (why: string): Error => createError(ErrorCodes.BACKEND_UNAVAILABLE, `VM ${vm.id} did not boot: ${why}`, { reason: 'boot-failed', console: consoleTail().slice(-2000) })
  const agent = await connectAgent(vm.agentSocket)
  try {
    for (;;) {
      // What is written before the guest opens its port waits in the socket: one ping is enough
      // unless it times out on a slow boot.
      const left = deadline - Date.now()
      if (left <= 0) throw createError(ErrorCodes.TIMEOUT, `VM ${vm.id} did not boot within ${timeoutMs} ms`, { timeoutMs, console: consoleTail().slice(-2000) })
      let timer: NodeJS.Timeout | undefined
      const answered = await Promise.race([
        agent.ping().then(() => true, (err: unknown) => {
          if (isWarrenError(err, ErrorCodes.TIMEOUT)) return false
          throw err
        }),
        new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), left) })
      ]).finally(() => clearTimeout(timer))
      if (answered) return agent
      if (!await isAlive(vm.pid, vm.startTime)) throw failed('QEMU ended')
    }
  } catch (err) {
    await agent.close().catch(() => {})
    if (isWarrenError(err, ErrorCodes.CONNECTION_CLOSED) || isWarrenError(err, ErrorCodes.SANDBOX_GONE)) throw failed('QEMU ended')
    throw err
  }
}

/**
 * Ends a VM and removes its host directory: QMP quit, SIGKILL if QEMU is still there after
 * `MicrovmDefaults.quitTimeoutMs`, then waits until it is gone. Idempotent: a VM already gone
 * only has its directory removed.
 * @throws WARREN_ERR_TIMEOUT when QEMU outlives SIGKILL
 */
export async function destroyVm (vm: LaunchedVm, opts: { timeoutMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? MicrovmDefaults.destroyTimeoutMs)
  if (await isAlive(vm.pid, vm.startTime)) {
    const quitBy = Date.now() + MicrovmDefaults.quitTimeoutMs
    try {
      const qmp = await connectQmp(vm.qmpSocket, MicrovmDefaults.quitTimeoutMs)
      // QEMU may close the socket before the reply: the process ending is what counts.
      await qmp.execute('quit', undefined, MicrovmDefaults.quitTimeoutMs).catch(() => {})
      qmp.close()
    } catch { /* no monitor to ask: SIGKILL below */ }
    while (Date.now() < quitBy && await isAlive(vm.pid, vm.startTime)) await pause(5)
    if (await isAlive(vm.pid, vm.startTime)) {
      try { process.kill(vm.pid, 'SIGKILL') } catch { /* ended meanwhile */ }
    }
  }
  while (await isAlive(vm.pid, vm.startTime)) {
    if (Date.now() > deadline) throw createError(ErrorCodes.TIMEOUT, `VM ${vm.id} (QEMU pid ${vm.pid}) outlived SIGKILL`, { id: vm.id, pid: vm.pid })
    await pause(5)
  }
  // Whatever a QEMU a guest took over left running as its user ends before the user is given again.
  // (Only its own: a record left behind that names another live VM's user must not end that VM.)
  if (vm.uid !== undefined && mayEndQemuUser(vm.uid, vm.dir)) await endQemuUser(vm.uid)
  releaseQemuUser(vm.uid, vm.dir)
  await rm(vm.dir, { recursive: true, force: true })
}

function pause (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
