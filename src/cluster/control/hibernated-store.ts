/**
 * HibernatedStore: the directory's hibernated records, kept in the control plane's state
 * database (table `hibernated`). Every other record is rebuilt from what nodes report after a
 * control-plane restart; a hibernated sandbox runs on no node, so without this row a restart
 * would forget it while its snapshot stays. A row lives from the hibernation to the resume,
 * kill or TTL that ends it.
 */
import type { Db } from '../../state/index.js'
import type { SandboxRecord } from './directory.js'

function statements (db: Db) {
  return {
    put: db.prepare<[string, string, string, number]>('INSERT OR REPLACE INTO hibernated (id, tenant, record, hibernated_at) VALUES (?, ?, ?, ?)'),
    remove: db.prepare<[string]>('DELETE FROM hibernated WHERE id = ?'),
    all: db.prepare<[], { record: string }>('SELECT record FROM hibernated ORDER BY hibernated_at')
  }
}

export class HibernatedStore {
  private readonly sql: ReturnType<typeof statements>

  /** @param db the state database, migrated (table hibernated) */
  constructor (db: Db) {
    this.sql = statements(db)
  }

  /** Keeps a record that has just hibernated (its state `hibernated`, its `snapshot` set). */
  put (r: SandboxRecord): void {
    this.sql.put.run(r.id, r.tenant, JSON.stringify(r), Date.now())
  }

  /** Forgets a record that is no longer hibernated. */
  remove (id: string): void {
    this.sql.remove.run(id)
  }

  /** Every hibernated record, oldest first; a row that does not parse is skipped. */
  all (): SandboxRecord[] {
    const out: SandboxRecord[] = []
    for (const { record } of this.sql.all.all()) {
      try {
        const r = JSON.parse(record) as SandboxRecord
        if (r.state === 'hibernated' && typeof r.id === 'string' && typeof r.snapshot === 'string') out.push(r)
      } catch { /* a row written by a broken build: nothing to resume from */ }
    }
    return out
  }
}
