/**
 * The control plane's image index as an actor: the one writer of the name index. Sessions ask
 * it to turn the layers a spec names into digests before placement, so placement (and its
 * layer locality) and nodes only ever see digests, and a digest the blob store does not hold
 * is refused here rather than on a node after placement.
 */
import { existsSync } from 'node:fs'
import { Actor } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { storePaths } from '../../images/blob/index.js'
import type { LayerKind, NameIndex } from '../../images/index.js'

export type ImageIndexMessage =
  | { type: 'tag', name: string, digest: string, kind: LayerKind }
  /** Names and digests with the spec fields that named them; answers their digests in order. */
  | { type: 'resolve', refs: Array<{ ref: string, field: string }> }
  | { type: 'list' }

export class ImageIndex extends Actor<ImageIndexMessage> {
  /** Digests found in the blob store: layers are immutable, so a hit is remembered. */
  private readonly stored = new Set<string>()

  /** @param blobRoot the blob store's root; without one, digests are left to the nodes to find */
  constructor (private readonly index: NameIndex, private readonly blobRoot?: string) { super() }

  receive (m: ImageIndexMessage): unknown {
    switch (m.type) {
      case 'tag': return this.index.tag(m.name, m.digest, m.kind)
      case 'resolve': return m.refs.map(({ ref, field }) => this.held(this.index.resolve(ref, field), field))
      case 'list': return this.index.list()
    }
  }

  /** `ref` when the cluster holds it (a stored digest, or the built-in base). */
  private held (ref: string, field: string): string {
    if (!ref.startsWith('sha256:') || this.blobRoot === undefined || this.stored.has(ref)) return ref
    if (!existsSync(storePaths(this.blobRoot, ref).blob)) {
      throw createError(ErrorCodes.BAD_SPEC, `spec.${field}: layer ${ref} is not in the blob store`, { field })
    }
    this.stored.add(ref)
    return ref
  }
}

export function createImageIndex (index: NameIndex, blobRoot?: string): () => ImageIndex {
  return () => new ImageIndex(index, blobRoot)
}
