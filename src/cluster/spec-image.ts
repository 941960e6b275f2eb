/**
 * What a spec's `image` may name: only layers the cluster already holds. A reference is
 *
 *   busybox          the built-in default base (base only)
 *   sha256:<hex>     a layer by digest (the control plane checks its blob store holds it)
 *   name:tag         a layer in the image index, resolved to its digest before placement
 *
 * Nothing else: no host directory, no Debian suite, no path, no other scheme. Building a layer
 * from a directory, an archive or a suite is an operator's act (`warren image build`), never a
 * side effect of a create.
 */
import { isDigest, isImageName } from '../images/index.js'
import { bad, isPlainObject, onlyKnown } from './spec-fields.js'
import type { SandboxSpec } from './spec.js'

export const ImageRefDefaults = {
  /** The built-in base layer (static busybox), built by each node itself. */
  builtinBase: 'busybox',
  maxRefLength: 256,
  maxTools: 16
}

export type SpecImage = NonNullable<SandboxSpec['image']>

/** True when `ref` is a layer digest (`sha256:` and 64 lowercase hex). */
export function isLayerDigest (ref: string): boolean {
  return isDigest(ref)
}

/** Checks one reference at `field`; `base` says whether the built-in base is allowed there. */
function layerRef (v: unknown, field: string, base: boolean): string {
  if (typeof v !== 'string' || v.length === 0) bad(field, 'must be a layer name (name:tag) or digest (sha256:…)')
  if (v.length > ImageRefDefaults.maxRefLength) bad(field, `is longer than ${ImageRefDefaults.maxRefLength}`)
  if (v === ImageRefDefaults.builtinBase) {
    if (base) return v
    bad(field, `cannot be ${v}: the built-in layer is a base`)
  }
  if (v.startsWith('sha256:')) {
    if (isLayerDigest(v)) return v
    bad(field, 'is not a digest: sha256: and 64 lowercase hex digits')
  }
  if (isImageName(v)) return v
  if (/^(dir|debian):/.test(v)) bad(field, 'cannot build a layer: a create names layers in the image index; an operator builds them with `warren image build`')
  bad(field, 'must be a layer name (name:tag), a digest (sha256:…) or busybox')
}

/** Checks `input.image` (container and VM backends only). */
export function parseImage (input: unknown, backend: SandboxSpec['backend']): SpecImage {
  if (backend === 'function') bad('image', 'is for the container and VM backends; a function sandbox has no layers')
  if (!isPlainObject(input)) bad('image', 'must be an object { base, workspace?, tools? }')
  // A snapshot's layers are stacked by naming the snapshot (spec.snapshot), never by a client
  // listing them: the control plane alone knows which layers it made and for whom.
  if (input.diffs !== undefined) bad('image.diffs', 'is internal: create from a snapshot with spec.snapshot')
  onlyKnown(input, ['base', 'workspace', 'tools'], 'image.')
  const image: SpecImage = { base: layerRef(input.base, 'image.base', true) }
  if (input.workspace !== undefined) image.workspace = layerRef(input.workspace, 'image.workspace', false)
  if (input.tools !== undefined) {
    if (!Array.isArray(input.tools)) bad('image.tools', 'must be a list of layer names or digests')
    if (input.tools.length > ImageRefDefaults.maxTools) bad('image.tools', `has more than ${ImageRefDefaults.maxTools} layers`)
    image.tools = input.tools.map((t, i) => layerRef(t, `image.tools.${i}`, false))
  }
  return image
}

/**
 * Each layer of an image with the field that named it, base first, then a snapshot's diffs
 * (digests the control plane put there, never resolved as names).
 */
export function specLayers (image: SpecImage): Array<{ ref: string, field: string }> {
  return [
    { ref: image.base, field: 'image.base' },
    ...(image.workspace !== undefined ? [{ ref: image.workspace, field: 'image.workspace' }] : []),
    ...(image.tools ?? []).map((ref, i) => ({ ref, field: `image.tools.${i}` })),
    ...(image.diffs ?? []).map((ref, i) => ({ ref, field: `image.diffs.${i}` }))
  ]
}
