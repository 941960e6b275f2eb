/**
 * The cluster's admin key: the one `warren up` prints (tenant `admin`, scope admin). The state
 * database keeps only its hash, like every key's; its secret is kept in the data dir
 * (`admin.key`, mode 0600, beside state.db, which an operator already guards), so a restarted
 * `warren up` prints the same key and the operator's config and scripts go on working.
 *
 * A rotation (over the API, or `warren up --rotate-admin-key` by whoever holds the data dir) makes
 * a new key, revokes the old one (its sessions are closed) and writes the file. The file is
 * written first, as `admin.key.next`, then the database commits, then the rename: a crash in
 * between leaves a file that holds the key the database has, which the next start finds.
 */
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { newToken, type IamStore } from './store.js'

export const AdminKeyDefaults = {
  fileName: 'admin.key'
}

/** What `ensure` found or made. */
export interface AdminKey {
  /** The admin key, or undefined when the database has one whose secret is nowhere here (see `lost`). */
  token: string | undefined
  /** `kept`: the one before; `created`: the first; `rotated`: a new one, the old revoked; `lost`: see token. */
  how: 'kept' | 'created' | 'rotated' | 'lost'
  /** The key ids revoked (whose sessions must be closed). */
  ended: string[]
}

export class AdminKeys {
  /** The admin key of an in-memory control plane, which has no file. */
  private memory: string | undefined

  /** @param dataDir where `admin.key` lives; undefined keeps it in memory (tests) */
  constructor (private readonly store: IamStore, private readonly dataDir: string | undefined) {}

  /**
   * The current admin key: kept when its secret is known (the file, or memory), made when there
   * is none yet, made anew with `rotate` (the old one revoked).
   */
  ensure (rotate = false): AdminKey {
    const id = this.store.adminKeyId()
    if (!rotate && id !== undefined) {
      const known = this.known(id)
      return known !== undefined ? { token: known, how: 'kept', ended: [] } : { token: undefined, how: 'lost', ended: [] }
    }
    const { token, ended } = this.rotate()
    return { token, how: id === undefined ? 'created' : 'rotated', ended }
  }

  /** A new admin key; the old one is revoked. @returns the new key and the ids revoked */
  rotate (): { token: string, ended: string[] } {
    const token = newToken()
    if (this.dataDir === undefined) {
      const old = this.store.replaceAdminKey(token)
      this.memory = token
      return { token, ended: old !== undefined ? [old] : [] }
    }
    const file = join(this.dataDir, AdminKeyDefaults.fileName)
    writeFileSync(`${file}.next`, token + '\n', { mode: 0o600 })
    chmodSync(`${file}.next`, 0o600)
    const old = this.store.replaceAdminKey(token)
    renameSync(`${file}.next`, file)
    return { token, ended: old !== undefined ? [old] : [] }
  }

  /** The secret of admin key `id`, when a file (or memory) holds it. */
  private known (id: string): string | undefined {
    const candidates = this.dataDir === undefined
      ? [this.memory]
      : ['', '.next'].map((suffix) => {
          try { return readFileSync(join(this.dataDir!, AdminKeyDefaults.fileName + suffix), 'utf8').trim() } catch { return undefined }
        })
    return candidates.find((t) => t !== undefined && this.store.authenticate(t)?.keyId === id)
  }
}
