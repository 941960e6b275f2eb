/**
 * A saved guest's RAM, which VMs restored from it map private: a memfd the node holds, made by
 * the agent binary (`warren-init ram`, ram.c: Node has no memfd_create or fcntl) and sealed once
 * the VM that wrote it has ended.
 *
 * Invariant: a VM is only ever restored from sealed RAM. QEMU opens its RAM read-write whatever
 * its mapping, so a file any VM could write would let a QEMU a guest took over change the pages
 * every other VM restored from it still shares, other tenants' among them. Sealed, writes, shared
 * writable mappings, hole punching and size changes all fail for every process, root's included,
 * while private mappings still copy on write.
 *
 * QEMU is given it as an inherited descriptor (`RAM_FD`) and opens it as `RAM_PATH`, so no path of
 * the node's reaches the command line. Its pages are shmem, charged to the memory cgroup of the
 * QEMU that first wrote them (and to that group's parent once it is removed); the seal gives the
 * holes theirs first, charged to the node, so a restored VM's cgroup pays only for its own copies.
 */
import { spawn } from 'node:child_process'
import { open, type FileHandle } from 'node:fs/promises'
import { createError, ErrorCodes } from '../../errors.js'
import { ContainerDefaults } from '../container/defaults.js'

/** The descriptor a QEMU is given its RAM as (3 is a state to load: vm-state.ts `STATE_FD`). */
export const RAM_FD = 4
/** What QEMU's memory backend opens: its inherited `RAM_FD`. */
export const RAM_PATH = `/proc/self/fd/${RAM_FD}`
/** What /proc shows for a descriptor or mapping of it (the name ram.c gives the memfd). */
export const GUEST_RAM_LINK = '/memfd:warren-guest-ram'

/** How long making or sealing one may take (a spawn of a small static binary). */
const HELPER_TIMEOUT_MS = 10_000

/** One guest's RAM, held by the node. */
export interface GuestRam {
  /** The node's descriptor of it: pass as a QEMU's `RAM_FD`. */
  readonly fd: number
  readonly bytes: number
  /** True once `seal` has succeeded: nothing can write it any more. */
  readonly sealed: boolean
  /**
   * Seals it against every write and size change.
   * @throws WARREN_ERR_BACKEND_UNAVAILABLE when the seal fails (a process still maps it shared and writable)
   */
  seal (): Promise<void>
  /** Lets go of it: its pages live on while a VM maps them. */
  close (): Promise<void>
}

/** Runs the agent binary's `ram` with `args`; resolves with its stdout once `until` matches it, or it exits 0. */
function runRamHelper (args: string[], stdio: Array<'pipe' | 'ignore' | number>, until?: (out: string, pid: number) => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(ContainerDefaults.agentPath, ['ram', ...args], { stdio, env: {} })
    let out = ''
    let err = ''
    let waiting = until !== undefined
    const fail = (why: string): void => {
      child.kill('SIGKILL')
      reject(createError(ErrorCodes.BACKEND_UNAVAILABLE, `warren-init ram ${args[0] ?? ''} failed: ${why}`, { reason: 'guest-ram' }))
    }
    const timer = setTimeout(() => fail(`no answer in ${HELPER_TIMEOUT_MS} ms`), HELPER_TIMEOUT_MS)
    child.stderr?.setEncoding('utf8').on('data', (s: string) => { if (err.length < 4096) err += s })
    child.stdout?.setEncoding('utf8').on('data', (s: string) => {
      out += s
      if (!waiting || !out.includes('\n')) return
      waiting = false
      until!(out, child.pid!).then(() => child.stdin?.end(), (e: unknown) => { clearTimeout(timer); fail(e instanceof Error ? e.message : String(e)) })
    })
    child.once('error', (e) => { clearTimeout(timer); fail(e.message) })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      if (code === 0 && !waiting) resolve()
      else fail(err.trim() || `exited with ${code ?? signal}`)
    })
  })
}

/**
 * New RAM of `bytes` (a multiple of 4096), zeroed, unsealed: for the one VM that writes it.
 * @throws WARREN_ERR_BACKEND_UNAVAILABLE when the agent binary cannot make it
 */
export async function createGuestRam (bytes: number): Promise<GuestRam> {
  let handle: FileHandle | undefined
  await runRamHelper(['create', String(bytes)], ['pipe', 'pipe', 'pipe'], async (out, pid) => {
    if (out !== 'ready\n') throw new Error(`said ${JSON.stringify(out.slice(0, 80))}`)
    // Read-write: what the VM that writes it opens through its inherited descriptor.
    handle = await open(`/proc/${pid}/fd/3`, 'r+')
  })
  const held = handle!
  let sealed = false
  return {
    fd: held.fd,
    bytes,
    get sealed () { return sealed },
    async seal () {
      await runRamHelper(['seal'], ['ignore', 'ignore', 'pipe', held.fd])
      sealed = true
    },
    async close () { await held.close().catch(() => {}) }
  }
}
