/**
 * `warren image build`: a directory, tar, container image or debootstrap suite becomes one
 * EROFS layer, pushed to the blob store with its chunk manifest and tagged `name:tag` on the
 * control plane. Deterministic: the same input gives the same digest.
 *
 *   warren image build --kind base --name debian-py:12 --debootstrap bookworm --include python3
 *   warren image build --kind workspace --name task-17:v1 --from-dir ./task
 *   warren image build --kind tools --name node:20 --from-oci node.tar [--platform linux/arm64]
 *
 * Archives are read in-process and unpacked into a tree in a private (0700) work directory,
 * which mkfs.erofs then reads; see src/images/oci for what is checked and what is left out.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'
import { debootstrapTree, LAYER_KINDS, makeErofsImage, unpackImage, unpackTar, type LayerKind } from '../images/index.js'
import { pushLayer, type PushedLayer } from '../images/blob/index.js'
import { withClient } from './client.js'
import { createProgress, type Progress } from './progress.js'

export interface ImageBuildFlags {
  kind?: string
  name?: string
  'from-dir'?: string
  'from-tar'?: string
  'from-oci'?: string
  /** `os/arch[/variant]` of the image to take from a --from-oci archive (linux/amd64 by default). */
  platform?: string
  debootstrap?: string
  include?: string
  store?: string
  'no-tag'?: boolean
}

export const ImageDefaults = {
  /** The blob store of `warren up` on this machine (its data dir's blobs). */
  store: join(homedir(), '.warren', 'data', 'blobs')
}

/**
 * The operator's path from a tree to a layer the cluster holds: an EROFS image of `tree`, pushed
 * to the blob store `store` with its chunk manifest. `warren image build` and
 * `warren run --image-dir` both come this way; a create then names the digest (or a tag of it).
 * @param work a scratch directory for the image file
 */
export async function buildAndPush (tree: string, store: string, work: string, progress: Progress): Promise<PushedLayer> {
  progress.step('building the EROFS image')
  const image = join(work, 'layer.erofs')
  await makeErofsImage(tree, image)
  progress.step('pushing to the blob store (with its chunk manifest)')
  return await pushLayer(store, image)
}

/** `warren image build`: builds one layer from one source, pushes it, and tags it unless --no-tag. */
export async function imageBuild (flags: ImageBuildFlags): Promise<number> {
  const kind = (flags.kind ?? 'base') as LayerKind
  if (!LAYER_KINDS.includes(kind)) throw createError(ErrorCodes.INVALID_ARGUMENT, `--kind must be one of ${LAYER_KINDS.join(', ')}`)
  const sources = (['from-dir', 'from-tar', 'from-oci', 'debootstrap'] as const).filter((k) => flags[k] !== undefined)
  if (sources.length !== 1) throw createError(ErrorCodes.INVALID_ARGUMENT, 'give exactly one of --from-dir, --from-tar, --from-oci, --debootstrap')
  if (flags.platform !== undefined && flags['from-oci'] === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--platform goes with --from-oci', { field: 'platform' })
  if (flags['no-tag'] !== true && flags.name === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--name NAME:TAG is required (or --no-tag)')
  const store = flags.store ?? ImageDefaults.store
  const progress = createProgress(4)
  const work = mkdtempSync(join(tmpdir(), 'warren-image-'))
  try {
    progress.step('preparing the tree')
    let tree: string
    if (flags['from-dir'] !== undefined) tree = flags['from-dir']
    else if (flags['from-tar'] !== undefined) {
      // Applied like an image layer: inside the tree, so no member or link reaches the host.
      tree = join(work, 'root')
      await unpackTar(flags['from-tar'], tree, { field: 'from-tar', onNote: (line) => progress.detail(line) })
    } else if (flags['from-oci'] !== undefined) {
      tree = join(work, 'root')
      const image = await unpackImage(flags['from-oci'], tree, {
        field: 'from-oci', onNote: (line) => progress.detail(line), ...(flags.platform !== undefined ? { platform: flags.platform } : {})
      })
      progress.detail(`${image.platform}, ${image.layers} layer${image.layers === 1 ? '' : 's'}`)
    } else {
      const include = (flags.include ?? '').split(',').map((p) => p.trim()).filter((p) => p !== '')
      tree = await debootstrapTree(join(store, '..', 'trees'), flags.debootstrap!, include, (line) => progress.detail(line))
    }
    const pushed = await buildAndPush(tree, store, work, progress)
    let tagged = ''
    if (flags['no-tag'] !== true) {
      progress.step(`tagging ${flags.name}`)
      await withClient(async (client) => { await client.request({ type: 'image-tag', name: flags.name!, digest: pushed.digest, kind }) })
      tagged = ` as ${flags.name}`
    }
    progress.done()
    process.stdout.write(`${pushed.digest}  ${(pushed.size / 1024 / 1024).toFixed(1)} MiB  ${pushed.manifest.chunks.length} chunks${tagged}\n`)
    return 0
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/** `warren image ls` */
export async function imageList (): Promise<number> {
  return await withClient(async (client) => {
    const list = await client.request<Array<{ name: string, digest: string, kind: string, taggedAt: string }>>({ type: 'image-list' })
    for (const r of list) process.stdout.write(`${r.name.padEnd(32)} ${r.kind.padEnd(9)} ${r.digest}  ${r.taggedAt}\n`)
    return 0
  })
}
