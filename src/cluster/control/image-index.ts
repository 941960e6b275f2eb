/**
 * The control plane's image index as an actor: the one writer of the name index. Sessions ask
 * it to turn the names in a spec into digests before placement, so placement (and its layer
 * locality) and nodes only ever see digests.
 */
import { Actor } from '../../actors/index.js'
import type { LayerKind, NameIndex } from '../../images/index.js'

export type ImageIndexMessage =
  | { type: 'tag', name: string, digest: string, kind: LayerKind }
  | { type: 'resolve', refs: string[] }
  | { type: 'list' }

export class ImageIndex extends Actor<ImageIndexMessage> {
  constructor (private readonly index: NameIndex) { super() }

  receive (m: ImageIndexMessage): unknown {
    switch (m.type) {
      case 'tag': return this.index.tag(m.name, m.digest, m.kind)
      case 'resolve': return m.refs.map((r) => this.index.resolve(r))
      case 'list': return this.index.list()
    }
  }
}

export function createImageIndex (index: NameIndex): () => ImageIndex {
  return () => new ImageIndex(index)
}
