/**
 * The versioned name index: `name:tag` → layer digest, with every earlier digest of the tag
 * kept in order, so a spec can name `python:3.11` and a rollout that named it yesterday can
 * still be explained. Persisted as one JSON file, written atomically.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'

export type LayerKind = 'base' | 'workspace' | 'tools'
export const LAYER_KINDS: readonly LayerKind[] = ['base', 'workspace', 'tools']

export interface TagRecord {
  digest: string
  kind: LayerKind
  taggedAt: string
  /** Earlier digests of this tag, newest first. */
  history: Array<{ digest: string, taggedAt: string }>
}

const NAME = /^[a-z0-9][a-z0-9._/-]{0,127}:[A-Za-z0-9._-]{1,64}$/

/** True when `ref` has the form of a `name:tag` (not a digest, not a built-in reference). */
export function isImageName (ref: string): boolean {
  return NAME.test(ref) && !ref.startsWith('sha256:') && !ref.startsWith('dir:') && !ref.startsWith('debian:')
}

export class NameIndex {
  private tags: Record<string, TagRecord> = {}

  /** @param file where the index persists; undefined keeps it in memory */
  constructor (private readonly file?: string) {
    if (file === undefined) return
    try {
      this.tags = JSON.parse(readFileSync(file, 'utf8')) as Record<string, TagRecord>
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
  }

  /** Points `name:tag` at a digest; the previous digest goes into the history. */
  tag (name: string, digest: string, kind: LayerKind): TagRecord {
    if (!NAME.test(name)) throw createError(ErrorCodes.INVALID_ARGUMENT, `image names are name:tag (lowercase name, tag of [A-Za-z0-9._-]), not ${name}`)
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw createError(ErrorCodes.INVALID_ARGUMENT, `bad digest ${digest}`)
    if (!LAYER_KINDS.includes(kind)) throw createError(ErrorCodes.INVALID_ARGUMENT, `kind must be one of ${LAYER_KINDS.join(', ')}`)
    const now = new Date().toISOString()
    const prev = this.tags[name]
    const history = prev === undefined || prev.digest === digest ? prev?.history ?? [] : [{ digest: prev.digest, taggedAt: prev.taggedAt }, ...prev.history].slice(0, 100)
    const record: TagRecord = { digest, kind, taggedAt: now, history }
    this.tags[name] = record
    this.save()
    return record
  }

  /**
   * The digest a reference stands for: digests and built-ins as they are, names looked up.
   * @param field the spec field that named it, for the refusal of an unknown name
   */
  resolve (ref: string, field = 'image'): string {
    if (!isImageName(ref)) return ref
    const record = Object.hasOwn(this.tags, ref) ? this.tags[ref] : undefined
    if (record === undefined) throw createError(ErrorCodes.BAD_SPEC, `spec.${field}: no image named ${ref}`, { field })
    return record.digest
  }

  /** Every tag, for `warren image ls`. */
  list (): Array<{ name: string } & TagRecord> {
    return Object.entries(this.tags).map(([name, r]) => ({ name, ...r }))
  }

  private save (): void {
    if (this.file === undefined) return
    mkdirSync(dirname(this.file), { recursive: true })
    const tmp = `${this.file}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(this.tags, null, 2))
    renameSync(tmp, this.file)
  }
}
