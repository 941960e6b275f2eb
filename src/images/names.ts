/**
 * The versioned name index: `name:tag` → layer digest, with every earlier digest of the tag
 * kept in order, so a spec can name `python:3.11` and a rollout that named it yesterday can
 * still be explained. Kept in the control plane's state database (src/state): each tag is one
 * transaction, on disk before it is acknowledged.
 */
import { createError, ErrorCodes } from '../errors.js'
import { isDigest } from './blob/index.js'
import { checkName, isReservedWord, type Db, type Warn } from '../state/index.js'

export type LayerKind = 'base' | 'workspace' | 'tools'
export const LAYER_KINDS: readonly LayerKind[] = ['base', 'workspace', 'tools']

/**
 * What the blob store holds: the layers operators build (LayerKind), and what nodes push:
 * `snapshot` (a sandbox's file system cut into a layer: stacked only as a snapshot's diff) and
 * `record` (bytes a trajectory keeps: outputs, file contents; never stacked). A blob keeps the
 * kind it was first recorded with, so one kind can never be stacked as another.
 */
export type BlobKind = LayerKind | 'snapshot' | 'record'
export const BLOB_KINDS: readonly BlobKind[] = [...LAYER_KINDS, 'snapshot', 'record']
/** The kinds a node may push with its join token (operators' keys push layer kinds). */
export const NODE_BLOB_KINDS: readonly BlobKind[] = ['snapshot', 'record']

export interface TagRecord {
  digest: string
  kind: LayerKind
  taggedAt: string
  /** Earlier digests of this tag, newest first. */
  history: Array<{ digest: string, taggedAt: string }>
}

export const NameIndexDefaults = {
  /** Earlier digests kept per tag. */
  historyLength: 100
}

const NAME = /^[a-z0-9][a-z0-9._/-]{0,127}:[A-Za-z0-9._-]{1,64}$/
const NAME_RULE = 'name:tag (a lowercase name of [a-z0-9._/-] up to 128, a tag of [A-Za-z0-9._-] up to 64)'

/** True when `ref` has the form of a `name:tag` (not a digest, not a built-in reference). */
export function isImageName (ref: string): boolean {
  return NAME.test(ref) && !ref.startsWith('sha256:') && !ref.startsWith('dir:') && !ref.startsWith('debian:')
}

/**
 * An image name as an admin may tag it: the grammar, and no reserved word as a path part or tag.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `name`
 */
export function checkImageName (name: unknown): string {
  checkName(name, 'name', NAME, NAME_RULE)
  // A name a create could not use as one (it would read as a digest or an old host reference) is never tagged.
  if (!isImageName(name as string)) throw createError(ErrorCodes.INVALID_ARGUMENT, `image name ${String(name)}: names starting sha256:, dir: or debian: are not image names`, { field: 'name' })
  const [path, tag] = (name as string).split(':') as [string, string]
  const word = [...path.split('/'), tag].find(isReservedWord)
  if (word !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `image name ${String(name)}: ${word} is a reserved word`, { field: 'name' })
  return name as string
}

/**
 * Checks what a tag request names, in this order: the name, the digest's form, the kind.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `name`, `digest` or `kind`
 */
export function checkTag (name: unknown, digest: unknown, kind: unknown): void {
  checkImageName(name)
  if (!isDigest(digest)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad digest ${String(digest).slice(0, 80)}`, { field: 'digest' })
  if (!LAYER_KINDS.includes(kind as LayerKind)) throw createError(ErrorCodes.INVALID_ARGUMENT, `kind must be one of ${LAYER_KINDS.join(', ')}`, { field: 'kind' })
}

interface TagRow { name: string, digest: string, kind: LayerKind, tagged_at: string }
interface HistoryRow { name: string, digest: string, tagged_at: string }

function statements (db: Db) {
  return {
    tag: db.prepare<[string], TagRow>('SELECT * FROM image_tags WHERE name = ?'),
    tags: db.prepare<[], TagRow>('SELECT * FROM image_tags ORDER BY name'),
    putTag: db.prepare<[string, string, string, string]>(`INSERT INTO image_tags VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET
      digest = excluded.digest, kind = excluded.kind, tagged_at = excluded.tagged_at`),
    addTag: db.prepare<[string, string, string, string]>('INSERT OR IGNORE INTO image_tags VALUES (?, ?, ?, ?)'),
    history: db.prepare<[string, number], HistoryRow>('SELECT name, digest, tagged_at FROM image_history WHERE name = ? ORDER BY seq DESC LIMIT ?'),
    allHistory: db.prepare<[], HistoryRow>('SELECT name, digest, tagged_at FROM image_history ORDER BY name, seq DESC'),
    lastSeq: db.prepare<[string], { seq: number | null }>('SELECT max(seq) AS seq FROM image_history WHERE name = ?'),
    addHistory: db.prepare<[string, number, string, string]>('INSERT INTO image_history VALUES (?, ?, ?, ?)'),
    trimHistory: db.prepare<[string, number]>('DELETE FROM image_history WHERE name = ? AND seq <= ?')
  }
}

export class NameIndex {
  private readonly sql: ReturnType<typeof statements>

  /** @param db the state database (src/state), opened and migrated */
  constructor (private readonly db: Db) {
    this.sql = statements(db)
  }

  /**
   * Points `name:tag` at a digest; the previous digest goes into the history.
   * @throws WARREN_ERR_INVALID_ARGUMENT naming `name`, `digest` or `kind`; nothing is written then
   */
  tag (name: string, digest: string, kind: LayerKind): TagRecord {
    checkTag(name, digest, kind)
    const now = new Date().toISOString()
    return this.db.transaction((): TagRecord => {
      const prev = this.sql.tag.get(name)
      if (prev !== undefined && prev.digest !== digest) {
        const seq = (this.sql.lastSeq.get(name)?.seq ?? 0) + 1
        this.sql.addHistory.run(name, seq, prev.digest, prev.tagged_at)
        this.sql.trimHistory.run(name, seq - NameIndexDefaults.historyLength)
      }
      this.sql.putTag.run(name, digest, kind, now)
      return { digest, kind, taggedAt: now, history: this.historyOf(name) }
    })()
  }

  /**
   * The digest a reference stands for: digests and built-ins as they are, names looked up.
   * @param field the spec field that named it, for the refusal of an unknown name
   */
  resolve (ref: string, field = 'image'): string {
    return this.lookup(ref, field).digest
  }

  /**
   * What a reference stands for, with the kind its tag records (a digest's kind is not the
   * name index's: see layer-kinds.ts).
   * @throws WARREN_ERR_BAD_SPEC naming `field` for a name that is not tagged
   */
  lookup (ref: string, field = 'image'): { digest: string, kind?: LayerKind } {
    if (!isImageName(ref)) return { digest: ref }
    const record = this.sql.tag.get(ref)
    if (record === undefined) throw createError(ErrorCodes.BAD_SPEC, `spec.${field}: no image named ${ref}`, { field })
    return { digest: record.digest, kind: record.kind }
  }

  /** Every tag, for `warren image ls`. */
  list (): Array<{ name: string } & TagRecord> {
    const history = new Map<string, TagRecord['history']>()
    for (const h of this.sql.allHistory.all()) {
      let list = history.get(h.name)
      if (list === undefined) { list = []; history.set(h.name, list) }
      list.push({ digest: h.digest, taggedAt: h.tagged_at })
    }
    return this.sql.tags.all().map((r) => ({ name: r.name, digest: r.digest, kind: r.kind, taggedAt: r.tagged_at, history: history.get(r.name) ?? [] }))
  }

  /**
   * Imports the images.json of an earlier version; names already here are kept as they are.
   * Runs inside the caller's transaction (src/state importLegacy).
   */
  importLegacy (data: unknown, warn: Warn): void {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) { warn('images.json holds no object; nothing imported'); return }
    for (const [name, r] of Object.entries(data as Record<string, Partial<TagRecord> | null>)) {
      let ok = r !== null && typeof r === 'object' && isDigest(r.digest) && LAYER_KINDS.includes(r.kind!)
      try { checkImageName(name) } catch { ok = false }
      if (!ok) { warn(`images.json: ${JSON.stringify(name)} is malformed; it is not imported`); continue }
      const taggedAt = typeof r!.taggedAt === 'string' ? r!.taggedAt : new Date().toISOString()
      if (this.sql.addTag.run(name, r!.digest!, r!.kind!, taggedAt).changes === 0) continue
      const history = Array.isArray(r!.history) ? r!.history.filter((h) => isDigest(h?.digest)) : []
      // Stored oldest first, so that seq grows towards the newest as a retag would have made it.
      history.slice(0, NameIndexDefaults.historyLength).reverse().forEach((h, i) => {
        this.sql.addHistory.run(name, i + 1, h.digest, typeof h.taggedAt === 'string' ? h.taggedAt : taggedAt)
      })
    }
  }

  private historyOf (name: string): TagRecord['history'] {
    return this.sql.history.all(name, NameIndexDefaults.historyLength).map((h) => ({ digest: h.digest, taggedAt: h.tagged_at }))
  }
}
