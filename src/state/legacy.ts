/**
 * Earlier versions kept state in JSON files in the data dir (iam.json, images.json). Each is
 * imported once, in one transaction, then renamed to `*.imported`, so an upgrade loses nothing
 * and a second start does not import it again. A file that does not parse (torn by a crash of
 * an old version) is renamed to `*.unreadable` and startup goes on: it is reported, not fatal.
 */
import { readFileSync, renameSync } from 'node:fs'
import type { Db } from './database.js'

/** Where import warnings go: the control plane's stderr unless a caller says otherwise. */
export type Warn = (message: string) => void

export const warnOnStderr: Warn = (message) => { process.stderr.write(`warren: state: ${message}\n`) }

/**
 * Imports one legacy JSON file when it exists.
 * @param apply writes the parsed file into the database; it runs inside the transaction, so
 *   what it writes lands whole or not at all, and should tolerate a second run (INSERT OR IGNORE)
 *   in case the process died between the commit and the rename
 */
export function importLegacyFile (db: Db, file: string, apply: (data: unknown) => void, warn: Warn = warnOnStderr): void {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
    throw err
  }
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch (err) {
    renameSync(file, `${file}.unreadable`)
    warn(`${file} is not valid JSON (${(err as Error).message}); nothing was imported from it, it is kept as ${file}.unreadable`)
    return
  }
  db.transaction(() => apply(data))()
  renameSync(file, `${file}.imported`)
  warn(`imported ${file} into the state database; the file is kept as ${file}.imported`)
}
