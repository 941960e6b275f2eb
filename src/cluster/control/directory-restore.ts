/**
 * The directory's claims of restores under way: a restore makes an ended sandbox again under its
 * id, which must happen once at a time (two would make two sandboxes of one id, numbering one
 * trajectory twice), and only to a sandbox that has ended.
 */
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxRecord } from './directory.js'

export class RestoreClaims {
  private readonly ids = new Set<string>()

  /** @param max restores under way at once (each holds its id until it is done) */
  constructor (private readonly max: number) {}

  /**
   * Claims `id` for a restore by `tenant`.
   * @param r its record, if the directory still has one
   * @param ended whether that record has ended
   * @throws WARREN_ERR_NOT_FOUND for another tenant's; INVALID_ARGUMENT naming `id` for a live or
   *   hibernated one, or one a restore is making already; OVERLOADED past `max`
   */
  claim (r: SandboxRecord | undefined, tenant: string, id: string, ended: boolean): void {
    if (r !== undefined && r.tenant !== tenant) throw createError(ErrorCodes.NOT_FOUND, `no sandbox ${id}`, { field: 'id' })
    if (r !== undefined && !ended) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `sandbox ${id} is ${r.state}: there is nothing to restore${r.state === 'hibernated' ? ' (resume it)' : ''}`, { field: 'id', state: r.state })
    }
    if (this.ids.has(id)) throw createError(ErrorCodes.INVALID_ARGUMENT, `a restore of sandbox ${id} is under way`, { field: 'id' })
    if (this.ids.size >= this.max) throw createError(ErrorCodes.OVERLOADED, `${this.ids.size} restores are under way`, { retryAfterMs: 1000 })
    this.ids.add(id)
  }

  /** The restore of `id` is done (made, or given up). */
  release (id: string): void { this.ids.delete(id) }
}
