/**
 * The control plane's image index as an actor: the one writer of the name index and of the
 * layers' kinds. Sessions ask it to turn the layers a spec names into digests before placement,
 * so placement (and its layer locality) and nodes only ever see digests; a digest the blob
 * store does not hold, or a layer stacked where its kind does not go (a workspace as a base),
 * is refused here rather than on a node after placement. Uploads tell it the kind of each
 * layer they store; a tag names only a layer the store holds.
 */
import { existsSync } from 'node:fs'
import { Actor } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { storePaths } from '../../images/blob/index.js'
import { checkTag, describeKind, kindForField, type BlobKind, type LayerKind, type LayerKinds, type NameIndex } from '../../images/index.js'
import { ImageRefDefaults } from '../spec-image.js'

export type ImageIndexMessage =
  | { type: 'tag', name: string, digest: string, kind: LayerKind }
  /** Names and digests with the spec fields that named them; answers their digests in order. */
  | { type: 'resolve', refs: Array<{ ref: string, field: string }> }
  | { type: 'list' }
  /** An upload stored a layer (or found it stored): its kind is recorded, or checked. */
  | { type: 'layer-stored', digest: string, kind: BlobKind }

export class ImageIndex extends Actor<ImageIndexMessage> {
  /** Digests found in the blob store: layers are immutable, so a hit is remembered. */
  private readonly stored = new Set<string>()

  /**
   * @param kinds the layers' kinds; without it, kinds are checked by tag only
   * @param blobRoot the blob store's root; without one, digests are left to the nodes to find
   */
  constructor (private readonly index: NameIndex, private readonly kinds?: LayerKinds, private readonly blobRoot?: string) { super() }

  receive (m: ImageIndexMessage): unknown {
    switch (m.type) {
      case 'tag': return this.tag(m.name, m.digest, m.kind)
      case 'resolve': return m.refs.map(({ ref, field }) => this.resolve(ref, field))
      case 'list': return this.index.list()
      case 'layer-stored':
        this.kinds?.record(m.digest, m.kind)
        this.stored.add(m.digest)
        return true
    }
  }

  /** Tags a layer the store holds; a layer keeps the kind it was pushed (or first tagged) as. */
  private tag (name: string, digest: string, kind: LayerKind): unknown {
    checkTag(name, digest, kind)
    if (!this.holds(digest)) {
      throw createError(ErrorCodes.NOT_FOUND, `layer ${digest} is not in the blob store: push it first (warren image build)`, { field: 'digest' })
    }
    this.kinds?.record(digest, kind)
    return this.index.tag(name, digest, kind)
  }

  /** The digest `ref` stands for, once the cluster holds it and its kind fits `field`. */
  private resolve (ref: string, field: string): string {
    const { digest, kind: tagged } = this.index.lookup(ref, field)
    if (digest === ImageRefDefaults.builtinBase) return digest
    // One refusal for a layer not there and for a snapshot's layer or a record, which is some
    // tenant's: telling its kind would tell another tenant that such a snapshot exists.
    const notStored = (): Error => createError(ErrorCodes.BAD_SPEC, `spec.${field}: layer ${digest} is not in the blob store (a snapshot's layers are used through spec.snapshot)`, { field })
    if (digest.startsWith('sha256:') && !this.holds(digest)) throw notStored()
    const kind = tagged ?? this.kinds?.kindOf(digest)
    const want = kindForField(field)
    if (kind === 'snapshot' || kind === 'record') throw notStored()
    if (kind !== undefined && kind !== want) {
      const named = ref === digest ? ref : `${ref} (${digest})`
      throw createError(ErrorCodes.BAD_SPEC,
        `spec.${field}: ${named} is ${describeKind(kind)}, and ${field} takes ${describeKind(want)} (built with --kind ${want})`,
        { field, kind, expected: want })
    }
    return digest
  }

  /** True when the blob store holds `digest` (always, when there is no store to look in). */
  private holds (digest: string): boolean {
    if (this.blobRoot === undefined || this.stored.has(digest)) return true
    if (!existsSync(storePaths(this.blobRoot, digest).blob)) return false
    this.stored.add(digest)
    return true
  }
}

export function createImageIndex (index: NameIndex, kinds?: LayerKinds, blobRoot?: string): () => ImageIndex {
  return () => new ImageIndex(index, kinds, blobRoot)
}
