/**
 * Why a command stops before its end: Ctrl-C (SIGINT), or the reader of its output going away
 * (EPIPE on stdout, as in `warren ps | head -1`). A command that holds something the cluster
 * keeps (a sandbox `warren run` created) watches for a stop and releases it first; any other
 * command just ends, quietly, with the stop's exit code.
 */

export interface Stop {
  /** What ended it. */
  reason: 'interrupt' | 'broken-pipe'
  /** 130 for Ctrl-C (128 + SIGINT), as shells report it; 0 for a reader that went away, which is no failure. */
  exitCode: number
}

export const StopDefaults = {
  /** How long a watcher's clean-up may take after a stop before the process ends anyway. */
  cleanupMs: 15_000
}

/** Thrown (and rejected with) when a watched piece of work is cut short by a stop. */
export class Stopped extends Error {
  constructor (readonly stop: Stop) { super(`stopped: ${stop.reason}`) }
}

interface Watcher { fire: (s: Stop) => void }
const watchers = new Set<Watcher>()
let stopped: Stop | undefined

function sigint (): void { requestStop({ reason: 'interrupt', exitCode: 130 }) }

/** Ends the process at once (a second Ctrl-C, or no one watching). */
function exitNow (code: number): never {
  process.exit(code)
}

/**
 * A stop has been asked for. With a watcher, it is told and cleans up (a second Ctrl-C ends the
 * process at once, as does a clean-up past `StopDefaults.cleanupMs`); with none, the process ends.
 */
export function requestStop (s: Stop): void {
  if (stopped !== undefined) {
    if (s.reason === 'interrupt') exitNow(stopped.exitCode === 0 ? 130 : stopped.exitCode)
    return
  }
  stopped = s
  if (watchers.size === 0) exitNow(s.exitCode)
  setTimeout(() => exitNow(s.exitCode), StopDefaults.cleanupMs).unref()
  for (const w of watchers) w.fire(s)
}

/**
 * Watches for a stop while `work` runs: resolves as it does, or rejects with `Stopped` when a
 * stop comes first (the work itself is left to its caller to undo). SIGINT is taken from
 * node's default (end at once) only while someone watches.
 */
export async function unlessStopped<T> (work: Promise<T>): Promise<T> {
  if (stopped !== undefined) throw new Stopped(stopped)
  let watcher: Watcher | undefined
  const stop = new Promise<never>((_resolve, reject) => { watcher = { fire: (s) => reject(new Stopped(s)) } })
  watchers.add(watcher!)
  if (watchers.size === 1) process.on('SIGINT', sigint)
  try {
    return await Promise.race([work, stop])
  } finally {
    watchers.delete(watcher!)
    if (watchers.size === 0) process.off('SIGINT', sigint)
  }
}

/** The stop that has happened, if one has: a clean-up may tell a stop from a failure by it. */
export function stopRequested (): Stop | undefined { return stopped }

/**
 * Makes a closed stdout (or stderr) a quiet stop instead of an uncaught EPIPE. Called once, by main.
 */
export function stopOnBrokenPipe (): void {
  const watch = (stream: NodeJS.WriteStream): void => {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      // A write after the pipe broke fails too (EPIPE, or a destroyed stream): nothing more to tell.
      if (err.code !== 'EPIPE' && !stream.destroyed) throw err
      // The broken pipe's socket would otherwise keep the process alive with its unwritten bytes.
      stream.destroy()
      requestStop({ reason: 'broken-pipe', exitCode: 0 })
    })
  }
  watch(process.stdout)
  watch(process.stderr)
}
