/**
 * A VM's machine state saved to a file and loaded into a new QEMU, over QMP: QEMU's migration
 * to `exec:cat > FILE` and from `exec:cat FILE` (the installed QEMU, 7.2, has no `file:` URI).
 *
 * The guest's RAM is not in the file: it is a file of its own (a memory backend shared with the
 * template QEMU, so the RAM *is* that file), and `x-ignore-shared` leaves it out of the stream,
 * which then holds the devices' and vCPUs' state alone (~70 KB). A restored VM maps the RAM file
 * private: it reads the template's pages, shared with every other VM restored from it, and gets
 * a copy of a page only when it writes it.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { MicrovmDefaults } from './defaults.js'
import { connectQmp, type QmpClient } from './qmp.js'

const IGNORE_SHARED = { capabilities: [{ capability: 'x-ignore-shared', state: true }] }

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
 * Stops the VM's vCPUs and saves its machine state (not its RAM: see above) to `file`. The VM
 * stays stopped; the caller ends it.
 */
export async function saveVmState (qmpSocket: string, file: string, timeoutMs: number = MicrovmDefaults.stateTimeoutMs): Promise<void> {
  const qmp = await connectQmp(qmpSocket)
  try {
    await qmp.execute('stop')
    await qmp.execute('migrate-set-capabilities', IGNORE_SHARED)
    await qmp.execute('migrate', { uri: `exec:cat > ${shellSafe(file)}` })
    await migrated(qmp, timeoutMs, 'saving the VM\'s state')
  } finally {
    qmp.close()
  }
}

/**
 * Loads the state saved in `file` into a QEMU started with `-incoming defer` (and the same
 * devices, and the RAM file mapped private), then runs its vCPUs: the guest goes on from the
 * instant it was saved.
 */
export async function loadVmState (qmpSocket: string, file: string, timeoutMs: number = MicrovmDefaults.stateTimeoutMs): Promise<void> {
  const qmp = await connectQmp(qmpSocket)
  try {
    await qmp.execute('migrate-set-capabilities', IGNORE_SHARED)
    await qmp.execute('migrate-incoming', { uri: `exec:cat ${shellSafe(file)}` })
    await migrated(qmp, timeoutMs, 'loading the VM\'s state')
    // Saved stopped, it arrives stopped.
    await qmp.execute('cont')
  } finally {
    qmp.close()
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
