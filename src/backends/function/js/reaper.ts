/**
 * Kills every live `js` child when the node's process exits in an orderly way (process.exit,
 * end of the event loop, an uncaught exception). A node that dies abruptly (SIGKILL, a fatal
 * V8 error) runs no handler at all; its children then end on their own (see orphan-watch.ts).
 */
import type { ChildProcess } from 'node:child_process'

/** Each live child with the way to kill it (its whole process group). */
const live = new Map<ChildProcess, () => void>()
let hooked = false

function killAll (): void {
  for (const kill of live.values()) {
    try { kill() } catch {}
  }
  live.clear()
}

/** Tracks `child` until it exits; `kill` ends it (and what it started) at once. */
export function reapOnExit (child: ChildProcess, kill: () => void): void {
  if (!hooked) {
    // One listener for every pool of the process, so many backends do not pile up listeners.
    process.on('exit', killAll)
    hooked = true
  }
  live.set(child, kill)
  const forget = (): void => { live.delete(child) }
  // 'close' also comes for a process that could not be spawned, which has no 'exit'.
  child.once('exit', forget)
  child.once('close', forget)
}
