/**
 * A VM's machine state saved to a file and loaded into a new QEMU, over QMP: QEMU's migration
 * to `exec:cat > FILE` and from `exec:cat FILE` (the installed QEMU, 7.2, has no `file:` URI).
 *
 * The guest's RAM is not in the file: it is a file of its own (a memory backend shared with the
 * template QEMU, so the RAM *is* that file), and `x-ignore-shared` leaves it out of the stream,
 * which then holds the devices' and vCPUs' state alone (~70 KB). A restored VM maps the RAM file
 * private: it reads the template's pages, shared with every other VM restored from it, and gets
 * a copy of a page only when it writes it.
 *
 * A memory snapshot of a live VM (`ram: 'in-stream'`) is the same save with the RAM in the
 * stream (its RAM is anonymous, or a template's file mapped private: nothing to leave out), the
 * writable layer with it (a tmpfs in guest memory, so disk and memory are cut at one instant).
 * The VM it came from goes on (`cont`); a VM loaded from it sees its old host connection end
 * (it was saved connected, and nobody is connected yet) and opens its port again, as a
 * template's guest does, so the node's new agent client starts on a clean stream.
 */
import { createConnection } from 'node:net'
import { createError, ErrorCodes } from '../../errors.js'
import { MicrovmDefaults } from './defaults.js'
import { connectQmp, type QmpClient } from './qmp.js'

const ignoreShared = (state: boolean): Record<string, unknown> => ({ capabilities: [{ capability: 'x-ignore-shared', state }] })

/** Where the guest's RAM goes: left out (a shared file: templates), or in the stream (memory snapshots). */
export type StateRam = 'shared-file' | 'in-stream'

/** How long saving or loading the state of a guest of `memoryMiB` may take. */
export function stateTimeoutMs (ram: StateRam, memoryMiB: number): number {
  return MicrovmDefaults.stateTimeoutMs + (ram === 'in-stream' ? memoryMiB * MicrovmDefaults.memoryStateMsPerMiB : 0)
}

/** A path QEMU's `exec:` migration runs through /bin/sh: only characters the shell takes as they are. */
function shellSafe (path: string): string {
  if (!/^[A-Za-z0-9._/+-]+$/.test(path)) throw createError(ErrorCodes.INVALID_ARGUMENT, `state file path ${JSON.stringify(path)} has characters a shell would read`, { field: 'runDir' })
  return path
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
 */
export async function saveVmState (qmpSocket: string, file: string, opts: { ram?: StateRam, timeoutMs?: number } = {}): Promise<void> {
  const ram = opts.ram ?? 'shared-file'
  const timeoutMs = opts.timeoutMs ?? MicrovmDefaults.stateTimeoutMs
  const qmp = await connectQmp(qmpSocket)
  try {
    await qmp.execute('stop')
    await qmp.execute('migrate-set-capabilities', ignoreShared(ram === 'shared-file'))
    if (ram === 'in-stream') await qmp.execute('migrate-set-parameters', { 'max-bandwidth': MicrovmDefaults.migrationBytesPerSecond })
    await qmp.execute('migrate', { uri: `exec:cat > ${shellSafe(file)}` })
    await migrated(qmp, timeoutMs, 'saving the VM\'s state')
  } finally {
    qmp.close()
  }
}

/**
 * Loads the state saved in `file` into a QEMU started with `-incoming defer` (and the same
 * devices; for a template's state the RAM file mapped private), then runs its vCPUs (unless
 * `run: false`: it stays stopped): the guest goes on from the instant it was saved. A memory
 * snapshot's (`ram: 'in-stream'`, or made shareable: `hangUpVia`) was saved with its host
 * connected (`hangUpVia`: the guest is made to hear it go, see `hangUpOnce`): this waits
 * until the guest has closed its agent port on hearing that connection end (QMP's
 * VSERPORT_CHANGE), so the node's connection is the guest's next, never the old one's stream
 * carried on (after `hangupTimeoutMs` it goes on all the same).
 */
export async function loadVmState (qmpSocket: string, file: string, opts: { ram?: StateRam, timeoutMs?: number, hangUpVia?: string, run?: boolean } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? MicrovmDefaults.stateTimeoutMs
  const qmp = await connectQmp(qmpSocket)
  try {
    // As it was saved: with x-ignore-shared the stream carries each RAM block's address too.
    await qmp.execute('migrate-set-capabilities', ignoreShared(opts.ram !== 'in-stream'))
    await qmp.execute('migrate-incoming', { uri: `exec:cat ${shellSafe(file)}` })
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
