/**
 * The kind of each blob the store holds, by digest: base, workspace or tools as a layer was
 * built, or snapshot and record for what a node pushed. Recorded when a blob is pushed (or, for
 * a layer put in the store by other means, when it is first tagged) and checked when a spec
 * stacks it, so a workspace named as a base is refused whether the spec names it by tag or by
 * digest, and a snapshot layer or a record is never stacked as a layer it is not. Kept in the
 * state database (src/state).
 */
import { createError, ErrorCodes } from '../errors.js'
import type { Db } from '../state/index.js'
import type { BlobKind, LayerKind } from './names.js'

/** The kind each position of a spec's `image` takes. */
export function kindForField (field: string): LayerKind {
  if (field === 'image.base') return 'base'
  if (field === 'image.workspace') return 'workspace'
  return 'tools'
}

/** How a refusal names a kind: "a workspace layer". */
export function describeKind (kind: BlobKind): string {
  if (kind === 'record') return 'a trajectory record (not a layer)'
  return kind === 'tools' ? 'a tools layer' : `a ${kind} layer`
}

function statements (db: Db) {
  return {
    get: db.prepare<[string], { kind: BlobKind }>('SELECT kind FROM layer_kinds WHERE digest = ?'),
    put: db.prepare<[string, string, string]>('INSERT OR IGNORE INTO layer_kinds VALUES (?, ?, ?)')
  }
}

export class LayerKinds {
  private readonly sql: ReturnType<typeof statements>

  /** @param db the state database, migrated (table layer_kinds) */
  constructor (db: Db) {
    this.sql = statements(db)
  }

  /** The recorded kind of a layer, or undefined when none was recorded. */
  kindOf (digest: string): BlobKind | undefined {
    return this.sql.get.get(digest)?.kind
  }

  /**
   * Records `digest` as `kind`; a layer keeps the kind it was first recorded with.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `kind` when the layer is recorded as another
   */
  record (digest: string, kind: BlobKind): void {
    const known = this.kindOf(digest)
    if (known !== undefined && known !== kind) {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `layer ${digest} is ${describeKind(known)}; it cannot be pushed or tagged as ${describeKind(kind)}`, { field: 'kind', kind: known })
    }
    if (known === undefined) this.sql.put.run(digest, kind, new Date().toISOString())
  }
}
