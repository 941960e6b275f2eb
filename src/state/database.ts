/**
 * Opens the control plane's SQLite database: WAL, `synchronous=FULL`, foreign keys, and the
 * migrations of ./schema.ts up to its version. FULL makes every commit wait for the WAL's
 * fsync, so a write acknowledged to a client survives kill -9 and power loss alike (NORMAL
 * would be durable against a crash of the process but could lose the last commits on power loss).
 */
import Database from 'better-sqlite3'
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { dirname } from 'node:path'
import { createError, ErrorCodes, isWarrenError, type WarrenError } from '../errors.js'
import { MIGRATIONS, SCHEMA_VERSION } from './schema.js'

export type Db = Database.Database

export const DatabaseDefaults = {
  /** How long a statement waits for a lock another connection holds (an operator's sqlite3 shell). */
  busyTimeoutMs: 5000
}

function unreadable (file: string, why: string): WarrenError {
  return createError(ErrorCodes.STATE_UNREADABLE,
    `the state database ${file} cannot be used: ${why}. Restore it from a backup, or move it (and its -wal file) away to start with empty state`,
    { file })
}

/** Runs the migrations the database has not had yet, each in its own transaction. */
function migrate (db: Db, file: string): void {
  const current = db.pragma('user_version', { simple: true }) as number
  if (current > SCHEMA_VERSION) throw unreadable(file, `it has schema version ${current}, newer than this warren's ${SCHEMA_VERSION}`)
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue
    try {
      db.transaction(() => {
        db.exec(m.sql)
        db.pragma(`user_version = ${m.version}`)
      })()
    } catch (err) {
      throw unreadable(file, `migration ${m.version} (${m.what}) failed: ${(err as Error).message}`)
    }
  }
}

/**
 * A second connection to a database `openDatabase` opened (and migrated), for writes at a high
 * rate whose loss on power failure is tolerable (trajectory records): its commits use
 * `synchronous=NORMAL`, so they wait for no fsync; in WAL mode they still survive a crash of
 * the process, and the next checkpoint (or commit of the main connection) syncs them.
 */
export function openBulkConnection (file: string): Db {
  const db = new Database(file)
  try {
    db.pragma(`busy_timeout = ${DatabaseDefaults.busyTimeoutMs}`)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('foreign_keys = ON')
    return db
  } catch (err) {
    db.close()
    throw unreadable(file, (err as Error).message)
  }
}

/**
 * Opens (creating when missing) the database at `file`, or an in-memory one when undefined.
 * @throws WARREN_ERR_STATE_UNREADABLE naming the file when it is not a sound database of a known version
 */
export function openDatabase (file: string | undefined): Db {
  const where = file ?? ':memory:'
  let db: Db | undefined
  try {
    if (file !== undefined) {
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
      // Created here first so it is 0600 (it holds key hashes); SQLite gives -wal and -shm the same mode.
      closeSync(openSync(file, 'a', 0o600))
    }
    db = new Database(where)
    db.pragma(`busy_timeout = ${DatabaseDefaults.busyTimeoutMs}`)
    const mode = db.pragma('journal_mode = WAL', { simple: true })
    if (file !== undefined && mode !== 'wal') throw unreadable(where, `it cannot be put in WAL mode (journal_mode is ${String(mode)})`)
    db.pragma('synchronous = FULL')
    db.pragma('foreign_keys = ON')
    const check = db.pragma('quick_check', { simple: true })
    if (check !== 'ok') throw unreadable(where, `its integrity check says ${String(check)}`)
    migrate(db, where)
    return db
  } catch (err) {
    db?.close()
    if (isWarrenError(err)) throw err
    throw unreadable(where, (err as Error).message)
  }
}
