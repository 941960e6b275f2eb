/**
 * `warren image build`: a directory, tar, container image or debootstrap suite becomes one
 * EROFS layer, pushed to the blob store with its chunk manifest and tagged `name:tag` on the
 * control plane. Deterministic: the same input gives the same digest.
 *
 * The push goes over HTTP to the control plane the SDK's config names (WARREN_URL, or
 * ~/.warren/config.json), from any machine: chunked, resumable (a build run again sends only
 * what the store lacks) and checked by digest on arrival. `--store DIR` instead writes straight
 * into a blob store directory on this machine (an operator's path, for the control plane's own
 * host).
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
import { pushLayer } from '../images/blob/index.js'
import { pushLayerOverHttp } from '../images/upload/index.js'
import { resolveConfig } from '../sdk/index.js'
import { loadCa } from '../transport/index.js'
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
  /** Where debootstrapped trees are kept between builds. */
  trees: join(homedir(), '.warren', 'data', 'trees')
}

/** Where a build's layer goes: a blob store directory on this machine, or the configured control plane. */
export type PushTarget = { store: string } | { url: string, token: string, ca?: string }

/** `--store DIR` when given, else the control plane of the SDK's config. */
export function pushTarget (store: string | undefined): PushTarget {
  return store !== undefined ? { store } : resolveConfig()
}

/** What a build pushed. */
export interface BuiltLayer {
  digest: string
  size: number
  chunks: number
}

/**
 * The operator's path from a tree to a layer the cluster holds: an EROFS image of `tree`, pushed
 * with its chunk manifest as `kind`. `warren image build` and `warren run --image-dir` both come
 * this way; a create then names the digest (or a tag of it).
 * @param work a scratch directory for the image file
 */
export async function buildAndPush (tree: string, target: PushTarget, kind: LayerKind, work: string, progress: Progress): Promise<BuiltLayer> {
  progress.step('building the EROFS image')
  const image = join(work, 'layer.erofs')
  await makeErofsImage(tree, image)
  if ('store' in target) {
    progress.step(`pushing to the blob store in ${target.store}`)
    const pushed = await pushLayer(target.store, image)
    return { digest: pushed.digest, size: pushed.size, chunks: pushed.manifest.chunks.length }
  }
  progress.step(`pushing to ${target.url}`)
  const pushed = await pushLayerOverHttp(image, { url: target.url, token: target.token, kind, ...(target.ca !== undefined ? { ca: loadCa(target.ca) } : {}) })
  const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`
  if (pushed.existed) progress.detail('the blob store holds this layer already: nothing sent')
  else if (pushed.sentBytes < pushed.size) progress.detail(`resumed: the blob store held ${mib(pushed.size - pushed.sentBytes)} already, sent ${mib(pushed.sentBytes)}`)
  return { digest: pushed.digest, size: pushed.size, chunks: pushed.manifest.chunks.length }
}

/** `warren image build`: builds one layer from one source, pushes it, and tags it unless --no-tag. */
export async function imageBuild (flags: ImageBuildFlags): Promise<number> {
  const kind = (flags.kind ?? 'base') as LayerKind
  if (!LAYER_KINDS.includes(kind)) throw createError(ErrorCodes.INVALID_ARGUMENT, `--kind must be one of ${LAYER_KINDS.join(', ')}`)
  const sources = (['from-dir', 'from-tar', 'from-oci', 'debootstrap'] as const).filter((k) => flags[k] !== undefined)
  if (sources.length !== 1) throw createError(ErrorCodes.INVALID_ARGUMENT, 'give exactly one of --from-dir, --from-tar, --from-oci, --debootstrap')
  if (flags.platform !== undefined && flags['from-oci'] === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--platform goes with --from-oci', { field: 'platform' })
  if (flags['no-tag'] !== true && flags.name === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--name NAME:TAG is required (or --no-tag)')
  const target = pushTarget(flags.store)
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
      tree = await debootstrapTree(flags.store !== undefined ? join(flags.store, '..', 'trees') : ImageDefaults.trees, flags.debootstrap!, include, (line) => progress.detail(line))
    }
    const pushed = await buildAndPush(tree, target, kind, work, progress)
    let tagged = ''
    if (flags['no-tag'] !== true) {
      progress.step(`tagging ${flags.name}`)
      await withClient(async (client) => { await client.request({ type: 'image-tag', name: flags.name!, digest: pushed.digest, kind }) })
      tagged = ` as ${flags.name}`
    }
    progress.done()
    process.stdout.write(`${pushed.digest}  ${(pushed.size / 1024 / 1024).toFixed(1)} MiB  ${pushed.chunks} chunks${tagged}\n`)
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
