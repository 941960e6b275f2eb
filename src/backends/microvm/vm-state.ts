/**
 * A VM's machine state saved to a file and loaded into a new QEMU, over QMP. Loading reads the
 * file QEMU was started with on `STATE_FD` (`migrate-incoming fd:3`); saving streams it to a
 * socket the node listens on inside the VM's jail (`migrate unix:/state.sock`), which the node
 * writes to the file, bounded. Either way QEMU opens nothing by path and runs no program: a
 * jailed QEMU has neither to reach (qemu-jail.ts).
 *
 * The guest's RAM is not in the file: it is a memfd of the node's (guest-ram.ts: a memory backend
 * shared with the template QEMU, so the RAM *is* that memfd), and `x-ignore-shared` leaves it out
 * of the stream, which then holds the devices' and vCPUs' state alone (~70 KB). A restored VM maps
 * that RAM, sealed, private: it reads the template's pages, shared with every other VM restored from it, and gets
 * a copy of a page only when it writes it.
 *
 * A memory snapshot of a live VM (`ram: 'in-stream'`) is the same save with the RAM in the
 * stream (its RAM is anonymous, or a template's file mapped private: nothing to leave out), the
 * writable layer with it (a tmpfs in guest memory, so disk and memory are cut at one instant).
 * The VM it came from goes on (`cont`); a VM loaded from it sees its old host connection end
 * (it was saved connected, and nobody is connected yet) and opens its port again, as a
 * template's guest does, so the node's new agent client starts on a clean stream.
 */
import { createWriteStream } from 'node:fs'
import { chmod, chown, mkdir, rm } from 'node:fs/promises'
import { createConnection, createServer, type Socket } from 'node:net'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'
import { MicrovmDefaults } from './defaults.js'
import type { LaunchedVm } from './launcher.js'
import { connectQmp, type QmpClient } from './qmp.js'
import { jailDir, jailPath } from './qemu-jail.js'

/** The descriptor a QEMU started to load a state (`-incoming defer`) has the state file on. */
export const STATE_FD = 3

/** The socket a save streams to, in the VM's jail. */
export const STATE_SOCKET = 'state.sock'

/** Bytes a saved state may hold beyond the guest's RAM in it (devices, vCPUs, page headers). */
export const STATE_SLACK_BYTES = 64 * 1024 * 1024

/** What saving a VM's state needs of it: its monitor, and its directory and user for the jail's socket. */
export type StateSource = Pick<LaunchedVm, 'qmpSocket' | 'dir' | 'uid'>

const ignoreShared = (state: boolean): Record<string, unknown> => ({ capabilities: [{ capability: 'x-ignore-shared', state }] })

/** Where the guest's RAM goes: left out (a shared file: templates), or in the stream (memory snapshots). */
export type StateRam = 'shared-file' | 'in-stream'

/** How long saving or loading the state of a guest of `memoryMiB` may take. */
export function stateTimeoutMs (ram: StateRam, memoryMiB: number): number {
  return MicrovmDefaults.stateTimeoutMs + (ram === 'in-stream' ? memoryMiB * MicrovmDefaults.memoryStateMsPerMiB : 0)
}

/** Waits until the migration (outgoing or incoming) completed. */
async function migrated (qmp: QmpClient, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const s = await qmp.execute('query-migrate') as { status?: string, 'error-desc'?: string }
    if (s.status === 'completed') return
    if (s.status === 'failed' || s.status === 'cancelled') {
      throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `${what} failed: ${s['error-desc'] ?? s.status}`, { reason: 'migration' })
    }
    if (Date.now() > deadline) throw createError(ErrorCodes.TIMEOUT, `${what} took over ${timeoutMs} ms`, { timeoutMs })
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/**
 * Stops the VM's vCPUs and saves its machine state to `file`: without its RAM (a template's,
 * see above) or with it (`ram: 'in-stream'`, a memory snapshot). The VM stays stopped; the
 * caller ends it, or runs it again (`setVcpus`).
 * @throws WARREN_ERR_QUOTA naming `memory` when QEMU sends more than `maxBytes` (default
 *   `STATE_SLACK_BYTES`, a state without its RAM; a save with the RAM in it passes its own): the
 *   save is cut there
 */
export async function saveVmState (vm: StateSource, file: string, opts: { ram?: StateRam, timeoutMs?: number, maxBytes?: number } = {}): Promise<void> {
  const ram = opts.ram ?? 'shared-file'
  const timeoutMs = opts.timeoutMs ?? MicrovmDefaults.stateTimeoutMs
  const maxBytes = opts.maxBytes ?? STATE_SLACK_BYTES
  const sink = await receiveState(vm, file, maxBytes)
  const qmp = await connectQmp(vm.qmpSocket).catch((err: unknown) => { sink.close(); throw err })
  try {
    await qmp.execute('stop')
    await qmp.execute('migrate-set-capabilities', ignoreShared(ram === 'shared-file'))
    if (ram === 'in-stream') await qmp.execute('migrate-set-parameters', { 'max-bandwidth': MicrovmDefaults.migrationBytesPerSecond })
    // One deadline for the whole save: QEMU sending it, then the file holding it.
    const deadline = Date.now() + timeoutMs
    await qmp.execute('migrate', { uri: `unix:${sink.qemuPath}` })
    await migrated(qmp, timeoutMs, 'saving the VM\'s state').catch(async (err: unknown) => {
      // A save past its time is called off, so a VM run again is not still streaming its RAM out.
      if (isWarrenError(err, ErrorCodes.TIMEOUT)) await qmp.execute('migrate_cancel').catch(() => {})
      // A save cut at the bound fails the migration: the bound is the reason to give.
      throw sink.failure() ?? err
    })
    await sink.written(deadline, timeoutMs)
  } finally {
    sink.close()
    qmp.close()
  }
}

/**
 * Listens on `state.sock` in the VM's jail (its QEMU's user alone may connect) and writes the one
 * stream that comes to `file`, cut past `maxBytes`.
 */
async function receiveState (vm: StateSource, file: string, maxBytes: number): Promise<{ qemuPath: string, written: (deadline: number, timeoutMs: number) => Promise<void>, failure: () => Error | undefined, close: () => void }> {
  const path = jailPath(vm, STATE_SOCKET)
  // A VM adopted from before jails has no jail directory: its QEMU, unjailed, finds the socket by the host's path.
  await mkdir(jailDir(vm.dir), { recursive: true, mode: 0o711 })
  await rm(path.host, { force: true })
  let failure: Error | undefined
  let settle: (err?: Error) => void = () => {}
  const done = new Promise<void>((resolve, reject) => { settle = (err) => { if (err !== undefined) reject(err); else resolve() } })
  done.catch(() => {})
  let taken: Socket | undefined
  const server = createServer((socket) => {
    if (taken !== undefined) { socket.destroy(); return }
    taken = socket
    server.close()
    const out = createWriteStream(file, { mode: 0o600 })
    let bytes = 0
    const fail = (err: Error): void => { failure ??= err; socket.destroy(); out.destroy(); settle(failure) }
    out.on('error', fail)
    socket.on('error', fail)
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes > maxBytes) { fail(createError(ErrorCodes.QUOTA, `the VM's saved state passed ${maxBytes} bytes`, { field: 'memory', maxBytes })); return }
      if (!out.write(chunk)) { socket.pause(); out.once('drain', () => socket.resume()) }
    })
    let ended = false
    // A write that fails at the end (ENOSPC) comes to end's callback, not before: it fails the save.
    socket.on('end', () => { ended = true; out.end((err?: Error | null) => { if (err !== undefined && err !== null) fail(err); else settle() }) })
    socket.on('close', () => { if (!ended) fail(createError(ErrorCodes.BACKEND_UNAVAILABLE, 'QEMU\'s state stream broke off', { reason: 'migration' })) })
  })
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(path.host, resolve) })
  try {
    if (vm.uid !== undefined) await chown(path.host, vm.uid, vm.uid)
    await chmod(path.host, 0o600)
  } catch (err) {
    server.close()
    throw err
  }
  return {
    qemuPath: path.qemu,
    failure: () => failure,
    written: async (deadline, timeoutMs) => {
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(createError(ErrorCodes.TIMEOUT, `the VM's saved state was not written within ${timeoutMs} ms`, { timeoutMs })), Math.max(0, deadline - Date.now()))
      })
      try {
        await Promise.race([done, late])
      } finally {
        clearTimeout(timer)
      }
    },
    close: () => {
      server.close()
      taken?.destroy()
      void rm(path.host, { force: true }).catch(() => {})
    }
  }
}

/**
 * Loads the state a QEMU was started with on `STATE_FD` (with `-incoming defer` and the same
 * devices; for a template's state its sealed RAM mapped private), then runs its vCPUs (unless
 * `run: false`: it stays stopped): the guest goes on from the instant it was saved. A memory
 * snapshot's (`ram: 'in-stream'`, or made shareable: `hangUpVia`) was saved with its host
 * connected (`hangUpVia`: the guest is made to hear it go, see `hangUpOnce`): this waits
 * until the guest has closed its agent port on hearing that connection end (QMP's
 * VSERPORT_CHANGE), so the node's connection is the guest's next, never the old one's stream
 * carried on (after `hangupTimeoutMs` it goes on all the same).
 */
export async function loadVmState (qmpSocket: string, opts: { ram?: StateRam, timeoutMs?: number, hangUpVia?: string, run?: boolean } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? MicrovmDefaults.stateTimeoutMs
  const qmp = await connectQmp(qmpSocket)
  try {
    // As it was saved: with x-ignore-shared the stream carries each RAM block's address too.
    await qmp.execute('migrate-set-capabilities', ignoreShared(opts.ram !== 'in-stream'))
    await qmp.execute('migrate-incoming', { uri: `fd:${STATE_FD}` })
    await migrated(qmp, timeoutMs, 'loading the VM\'s state')
    if (opts.run === false) return
    let stop: () => void = () => {}
    const hungUp = (opts.ram === 'in-stream' || opts.hangUpVia !== undefined)
      ? new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, MicrovmDefaults.hangupTimeoutMs)
        const off = qmp.onEvent((e) => { if (e.event === 'VSERPORT_CHANGE' && e.data?.id === 'agent0' && e.data.open === false) resolve() })
        stop = () => { clearTimeout(timer); off() }
        void qmp.ended.then(resolve)
      })
      : Promise.resolve()
    try {
      // Saved stopped, it arrives stopped.
      await qmp.execute('cont')
      if (opts.hangUpVia !== undefined) await hangUpOnce(qmp, opts.hangUpVia)
      await hungUp
    } finally {
      stop()
    }
  } finally {
    qmp.close()
  }
}

/**
 * Makes a running guest hear its agent port's host hang up, whatever state its port was saved
 * in: a connection to the port's socket, held until QEMU has taken it (`info chardev` no longer
 * says `disconnected`), then closed. QEMU tells the guest the host came and went; a guest that
 * believed its old host still there hears the same hang-up (opening is nothing new to it).
 */
async function hangUpOnce (qmp: QmpClient, agentSocket: string): Promise<void> {
  const socket = createConnection({ path: agentSocket })
  socket.on('error', () => {})
  try {
    const deadline = Date.now() + MicrovmDefaults.hangupTimeoutMs
    while (Date.now() < deadline) {
      const info = await qmp.execute('human-monitor-command', { 'command-line': 'info chardev' }) as string
      const line = info.split('\n').find((l) => l.startsWith('agent:'))
      if (line !== undefined && !line.includes('disconnected:')) return
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  } finally {
    socket.destroy()
  }
}

/** The VM's run state as QEMU says it: 'running', 'paused', 'inmigrate', ... */
export async function vmRunState (qmpSocket: string): Promise<string> {
  const qmp = await connectQmp(qmpSocket)
  try {
    const s = await qmp.execute('query-status') as { status?: string }
    return s.status ?? 'unknown'
  } finally {
    qmp.close()
  }
}

/** Stops (`stop`) or runs again (`cont`) the VM's vCPUs. */
export async function setVcpus (qmpSocket: string, running: boolean): Promise<void> {
  const qmp = await connectQmp(qmpSocket)
  try {
    await qmp.execute(running ? 'cont' : 'stop')
  } finally {
    qmp.close()
  }
}
