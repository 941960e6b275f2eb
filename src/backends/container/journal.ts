/**
 * The node's on-disk journal of container sandboxes: one small JSON file per live sandbox,
 * written before the sandbox is handed out and removed after it is reclaimed. Sandbox processes
 * do not die with the node agent, so a restarted agent reads the journal to find them again:
 * those still alive (same pid, same start time: pids get reused) are adopted, the rest are
 * reclaimed.
 *
 * Files are written to a temporary name and renamed, so a crash never leaves half a record.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface JournalRecord {
  id: string
  /** Host pid of the sandbox's init (PID 1 inside). */
  pid: number
  /** The init's start time (field 22 of /proc/PID/stat), to tell it from a reused pid. */
  pidStartTime: string
  socketPath: string
  /** The host directory holding the sandbox's upper layer and socket. */
  dir: string
  cgroup: string
  createdAt: number
  /** Whatever the node needs to rebuild its view of the sandbox (tenant, spec, …). */
  meta: unknown
}

export class Journal {
  constructor (private readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /** Records a sandbox (replacing an older record of the same id). */
  write (record: JournalRecord): void {
    const file = this.file(record.id)
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(record), { mode: 0o600 })
    renameSync(tmp, file)
  }

  /** Forgets a sandbox. */
  remove (id: string): void {
    rmSync(this.file(id), { force: true })
  }

  /** Every record; unreadable files are removed (they can only be torn writes of a crash). */
  readAll (): JournalRecord[] {
    const out: JournalRecord[] = []
    for (const name of readdirSync(this.dir)) {
      const path = join(this.dir, name)
      if (!name.endsWith('.json')) { rmSync(path, { force: true }); continue }
      try {
        out.push(JSON.parse(readFileSync(path, 'utf8')) as JournalRecord)
      } catch {
        rmSync(path, { force: true })
      }
    }
    return out
  }

  private file (id: string): string {
    if (!/^[a-zA-Z0-9_-]{1,64}$/.test(id)) throw new Error(`bad sandbox id for the journal: ${id}`)
    return join(this.dir, `${id}.json`)
  }
}

/** The start time of a process (field 22 of /proc/PID/stat), or undefined when it is gone. */
export function processStartTime (pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return rest[19] // field 22 overall is the 20th after the name
  } catch {
    return undefined
  }
}
