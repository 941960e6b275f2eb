/**
 * The control plane's durable state (docs/design.md, "State and operations"): one SQLite database
 * in the data dir holding tenants, keys, quotas, the join token's hash and image names. The
 * schema and its migrations are ./schema.ts; opening and pragmas ./database.ts.
 */
import { join } from 'node:path'
import { openBulkConnection, openDatabase, type Db } from './database.js'
import { importLegacyFile, warnOnStderr, type Warn } from './legacy.js'

export { DatabaseDefaults, openDatabase, type Db } from './database.js'
export { checkName, isReservedWord } from './names.js'
export { MIGRATIONS, SCHEMA_VERSION } from './schema.js'
export { warnOnStderr, type Warn } from './legacy.js'

export const StateDefaults = {
  /** The database's file name in the data dir. */
  fileName: 'state.db'
}

export interface State {
  readonly db: Db
  /**
   * The same database for writes at a high rate that may lose their last commits on power
   * failure, never on a crash of the process (trajectory records; see `openBulkConnection`).
   * `db` itself for in-memory state.
   */
  readonly bulk: Db
  /** The database file; undefined when the state is in memory. */
  readonly file: string | undefined
  /**
   * Imports `<dataDir>/<name>`, a JSON file of an earlier version, when it is there (once: it is
   * renamed afterwards). Does nothing for in-memory state.
   */
  importLegacy (name: string, apply: (data: unknown, warn: Warn) => void): void
  close (): void
}

/**
 * Opens the state in `dataDir`, or in memory when undefined (tests, simulation).
 * @throws WARREN_ERR_STATE_UNREADABLE naming the file when the database is corrupt or newer
 */
export function openState (dataDir: string | undefined, warn: Warn = warnOnStderr): State {
  const file = dataDir === undefined ? undefined : join(dataDir, StateDefaults.fileName)
  const db = openDatabase(file)
  let bulk: Db
  try {
    bulk = file === undefined ? db : openBulkConnection(file)
  } catch (err) {
    db.close()
    throw err
  }
  return {
    db,
    bulk,
    file,
    importLegacy (name, apply) {
      if (dataDir !== undefined) importLegacyFile(db, join(dataDir, name), (data) => apply(data, warn), warn)
    },
    close () {
      if (bulk.open) bulk.close()
      if (db.open) db.close()
    }
  }
}
