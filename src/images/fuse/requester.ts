/**
 * Whether the thread that sent a FUSE request is being killed. The kernel sends INTERRUPT for
 * any signal the reader takes while it waits: a SIGCHLD to a shell, a timer to QEMU, a profiler's
 * tick. Answering EINTR then hands the reader an error for a read that would have succeeded (few
 * programs retry an open or a read on EINTR, and SA_RESTART does not restart it). A reader being
 * killed is different: once the request reached us the kernel waits for our answer even past
 * SIGKILL, so a slow fetch would hold a dying process. A fatal signal shows as SIGKILL pending on
 * each of the process's threads, which is what is read here.
 */
import { readFileSync } from 'node:fs'

/** SIGKILL's bit in the pending masks of /proc/<tid>/status. */
const SIGKILL_BIT = 1n << 8n

/**
 * True when the thread `tid` (the request header's pid, in the server's pid namespace) has a
 * fatal signal pending, or is gone, or cannot be seen (0: outside the namespace).
 */
export function requesterDying (tid: number, procDir = '/proc'): boolean {
  if (tid <= 0) return true
  let status: string
  try {
    status = readFileSync(`${procDir}/${tid}/status`, 'latin1')
  } catch {
    return true // gone: nobody waits for the answer
  }
  for (const key of ['SigPnd:', 'ShdPnd:']) {
    const at = status.indexOf(key)
    if (at < 0) continue
    const end = status.indexOf('\n', at)
    const mask = BigInt(`0x${status.slice(at + key.length, end < 0 ? undefined : end).trim()}`)
    if ((mask & SIGKILL_BIT) !== 0n) return true
  }
  return false
}
