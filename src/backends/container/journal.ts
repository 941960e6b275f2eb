/**
 * The node's on-disk journal of container sandboxes: one small JSON file per live sandbox,
 * written before the sandbox is handed out and removed after it is reclaimed. Sandbox processes
 * do not die with the node agent, so a restarted agent reads the journal to find them again:
 * those still alive (same pid and start time: pids get reused) are adopted, the rest reclaimed.
 *
 * Files are written to a temporary name and renamed, so a crash never leaves half a record.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export class Journal<R> {
  constructor (private readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /** Records a sandbox (replacing an older record of the same id). */
  write (id: string, record: R): void {
    const file = this.file(id)
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(record), { mode: 0o600 })
    renameSync(tmp, file)
  }

  /** Forgets a sandbox. */
  remove (id: string): void {
    rmSync(this.file(id), { force: true })
  }

  /** Every record; unreadable files are removed (they can only be torn writes of a crash). */
  readAll (): R[] {
    const out: R[] = []
    for (const name of readdirSync(this.dir)) {
      const path = join(this.dir, name)
      if (!name.endsWith('.json')) { rmSync(path, { force: true }); continue }
      try {
        out.push(JSON.parse(readFileSync(path, 'utf8')) as R)
      } catch {
        rmSync(path, { force: true })
      }
    }
    return out
  }

  private file (id: string): string {
    if (!/^[a-zA-Z0-9._-]{1,64}$/.test(id)) throw new Error(`bad sandbox id for the journal: ${id}`)
    return join(this.dir, `${id}.json`)
  }
}
