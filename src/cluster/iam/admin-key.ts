/**
 * The cluster's admin key: the one `warren up` prints (tenant `admin`, scope admin). Like every
 * key, only its hash is stored (the state database's `admin_key_id` setting says which key it
 * is); its secret is where `warren up` wrote it, the operator's config file (0600). A restarted
 * `warren up` offers the token of that file as the `candidate`: when it is the admin key, the key
 * is kept and printed again. When it is not (the file was lost or rotated elsewhere), the admin
 * key stays as it is (whoever holds it goes on using it) and is reported `lost`, not replaced
 * behind the operator's back; `warren up --rotate-admin-key` (whoever holds the data dir) makes
 * a new one.
 *
 * A deployment declares its admin key instead (`declared`, from a secret: `WARREN_ADMIN_KEY`):
 * that token is the admin key, made so (the one before revoked) when it is not yet, so an
 * operator's clients can read it from the same secret and a changed secret rotates it.
 *
 * A new key is handed to `persist` (the config file) before the database commits it, so a crash
 * between the two leaves a file whose key does not work yet, never a working key nobody has.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { isTokenShaped, keyIdOf, newToken, type IamStore } from './store.js'

/** What `ensure` found or made. */
export interface AdminKey {
  /** The admin key, or undefined when its secret is not known here (`lost`). */
  token: string | undefined
  /** `kept`: the one before; `created`: the first; `rotated`: a new one, the old revoked; `lost`: see token. */
  how: 'kept' | 'created' | 'rotated' | 'lost'
  /** The key ids revoked (whose sessions must be closed). */
  ended: string[]
}

export interface EnsureOptions {
  /** Make a new admin key, revoking the one before. */
  rotate?: boolean
  /** A token that may be the admin key (the config file's). */
  candidate?: string
  /** Called with a new admin key before it is committed (writes it where the operator finds it). */
  persist?: (token: string) => void
  /** The admin key as the deployment declares it (`WARREN_ADMIN_KEY`): made the admin key when it is not. */
  declared?: string
}

export class AdminKeys {
  /** The admin key's secret when this process made or was shown it; never written anywhere by this module. */
  private known: string | undefined

  constructor (private readonly store: IamStore) {}

  /** The current admin key: kept when its secret is known, made when there is none yet or with `rotate`. */
  ensure (o: EnsureOptions = {}): AdminKey {
    const id = this.store.adminKeyId()
    if (o.declared !== undefined) return this.declare(o.declared, id, o)
    if (o.rotate !== true && id !== undefined) {
      const token = [o.candidate, this.known].find((t) => t !== undefined && this.store.authenticate(t)?.keyId === id)
      if (token === undefined) return { token: undefined, how: 'lost', ended: [] }
      this.known = token
      return { token, how: 'kept', ended: [] }
    }
    const { token, ended } = this.rotate(o.persist)
    return { token, how: id === undefined ? 'created' : 'rotated', ended }
  }

  /**
   * Makes the deployment's token the admin key, unless it already is.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `WARREN_ADMIN_KEY` when it is not shaped as a key or
   *   is another key's, or naming `rotate-admin-key` when a rotation is asked for too
   */
  private declare (token: string, id: string | undefined, o: EnsureOptions): AdminKey {
    if (o.rotate === true) throw createError(ErrorCodes.INVALID_ARGUMENT, 'the admin key is declared by WARREN_ADMIN_KEY: change that secret to rotate it', { field: 'rotate-admin-key' })
    if (!isTokenShaped(token)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'WARREN_ADMIN_KEY must be wrn_, a 12-character key id of [0-9a-z], _ and 43 characters of [A-Za-z0-9_-] (warren token create prints one)', { field: 'WARREN_ADMIN_KEY' })
    if (id !== undefined && this.store.authenticate(token)?.keyId === id) {
      this.known = token
      return { token, how: 'kept', ended: [] }
    }
    if (this.store.hasKey(keyIdOf(token)!)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'WARREN_ADMIN_KEY has the id of another key: make a new one for the admin key', { field: 'WARREN_ADMIN_KEY' })
    o.persist?.(token)
    const old = this.store.replaceAdminKey(token)
    this.known = token
    return { token, how: id === undefined ? 'created' : 'rotated', ended: old !== undefined ? [old] : [] }
  }

  /** A new admin key; the old one is revoked. @returns the new key and the ids revoked */
  rotate (persist?: (token: string) => void): { token: string, ended: string[] } {
    const token = newToken()
    persist?.(token)
    const old = this.store.replaceAdminKey(token)
    this.known = token
    return { token, ended: old !== undefined ? [old] : [] }
  }
}
