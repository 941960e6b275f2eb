/**
 * Host-side facts about a process from /proc. A PID alone can name a different process later
 * (PIDs are reused), so a sandbox is identified by its PID and its start time together.
 */
import { readFile } from 'node:fs/promises'

/** The state letter and start time (clock ticks since boot) of a process, or undefined when there is none. */
export async function processInfo (pid: number): Promise<{ state: string, startTime: number } | undefined> {
  let stat: string
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return { state: rest[0] ?? '?', startTime: Number(rest[19]) }
}

/**
 * True while the process `pid` that started at `startTime` is still running: not gone, not a
 * zombie (a zombie has released its namespaces and mounts; only its exit status is left for its
 * parent to collect).
 */
export async function isAlive (pid: number, startTime: number): Promise<boolean> {
  const info = await processInfo(pid)
  return info !== undefined && info.startTime === startTime && info.state !== 'Z' && info.state !== 'X'
}
