/**
 * Makes a `js` child die with its node. An idle child exits when its IPC channel disconnects,
 * but a busy one is inside a synchronous evaluation that can last as long as the call's time
 * limit, so its event loop never sees the disconnect. A small worker thread, which the
 * evaluation cannot block, checks instead whether the node is still the parent, and kills the
 * whole process (SIGKILL: nothing in it may run on) the moment it is not.
 */
import { Worker } from 'node:worker_threads'

/** How often the watch looks; also the longest a child outlives a node that died abruptly. */
const CHECK_INTERVAL_MS = 200

/** Runs in the watch thread: plain CommonJS, no imports of ours, so it starts fast. */
const WATCH_SOURCE = `
const { workerData } = require('node:worker_threads')
const check = () => { if (process.ppid !== workerData.parentPid) process.kill(process.pid, 'SIGKILL') }
check()
setInterval(check, workerData.intervalMs)
`

/**
 * Starts the watch. The process ends (code 70) if the watch thread itself fails, since a child
 * that could outlive its node must not take calls.
 * @param parentPid the node's pid, given by the node on the command line (the parent could
 *   already be gone when this runs, so `process.ppid` now would not do)
 */
export function exitWithParent (parentPid: number): void {
  const watch = new Worker(WATCH_SOURCE, {
    eval: true,
    workerData: { parentPid, intervalMs: CHECK_INTERVAL_MS },
    // The watch allocates next to nothing; its own small heap keeps its cost per child low.
    resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 2 }
  })
  // Only the IPC channel keeps a child alive; the watch must not.
  watch.unref()
  let exiting = false
  process.once('exit', () => { exiting = true })
  const fail = (): void => { if (!exiting) process.exit(70) }
  watch.on('error', fail)
  watch.on('exit', fail)
}
