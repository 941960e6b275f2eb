/**
 * Image archives built in memory for tests, with tar-stream's packer: plain layer tars with any
 * member a hostile image could hold, and the two outer formats warren reads (an OCI image layout,
 * a `docker save` archive), their blobs named by digest as the formats say.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { pack, type Header } from 'tar-stream'

/** One member of a tar: a header and, for files, its bytes. */
export interface Member extends Partial<Header> {
  name: string
  data?: string | Buffer
}

/** The tar of `members`, in order. */
export function tarOf (members: Member[]): Promise<Buffer> {
  const p = pack()
  const chunks: Buffer[] = []
  p.on('data', (b: unknown) => { chunks.push(b as Buffer) }) // streamx types its data as unknown
  const done = new Promise<Buffer>((resolve, reject) => {
    p.on('end', () => resolve(Buffer.concat(chunks)))
    p.on('error', reject)
  })
  for (const { data, ...header } of members) {
    const body = data === undefined ? undefined : Buffer.from(data)
    p.entry({ mode: header.type === 'directory' ? 0o755 : 0o644, mtime: new Date(0), ...header, ...(body !== undefined ? { size: body.length } : {}) }, body ?? Buffer.alloc(0))
  }
  p.finalize()
  return done
}

export const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`

export interface Platform { os: string, architecture: string, variant?: string }

/** One image of an archive: its platform and its layer tars (bottom first), optionally gzipped. */
export interface TestImage {
  platform: Platform
  layers: Buffer[]
  gzip?: boolean
  /** Bytes stored under a layer's digest instead of the layer's own (index → bytes), to test verification. */
  tamperLayer?: Record<number, Buffer>
  /** What the config says the uncompressed layers' digests are, instead of the truth. */
  diffIds?: string[]
  /** The layers' media type, instead of the one their compression says. */
  layerMediaType?: string
  /** Extra keys in the manifest JSON (e.g. padding). */
  extra?: Record<string, unknown>
}

const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar',
  layerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip'
}

function configOf (image: TestImage): Buffer {
  return Buffer.from(JSON.stringify({
    ...image.platform,
    config: { Cmd: ['sh'] },
    rootfs: { type: 'layers', diff_ids: image.diffIds ?? image.layers.map(sha256) }
  }))
}

/**
 * An OCI image layout tar. With `nested`, index.json names one image index that names the
 * images (as `docker buildx` writes them); without, index.json names the images directly.
 */
export async function ociArchive (images: TestImage[], options: { nested?: boolean } = {}): Promise<Buffer> {
  const blobs = new Map<string, Buffer>()
  const put = (b: Buffer): string => { const d = sha256(b); blobs.set(d, b); return d }
  const descriptors = images.map((image) => {
    const layers = image.layers.map((l, i) => {
      const blob = image.gzip === true ? gzipSync(l) : l
      const digest = sha256(blob)
      blobs.set(digest, image.tamperLayer?.[i] ?? blob)
      return { mediaType: image.layerMediaType ?? (image.gzip === true ? MEDIA.layerGzip : MEDIA.layer), digest, size: blob.length }
    })
    const config = configOf(image)
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.manifest,
      config: { mediaType: MEDIA.config, digest: put(config), size: config.length },
      layers,
      ...image.extra
    }))
    return { mediaType: MEDIA.manifest, digest: put(manifest), size: manifest.length, platform: image.platform }
  })
  let top = descriptors
  if (options.nested === true) {
    const inner = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.index, manifests: descriptors }))
    top = [{ mediaType: MEDIA.index, digest: put(inner), size: inner.length } as typeof descriptors[number]]
  }
  const index = JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.index, manifests: top })
  return await tarOf([
    { name: 'oci-layout', data: '{"imageLayoutVersion":"1.0.0"}' },
    { name: 'index.json', data: index },
    { name: 'blobs/', type: 'directory' },
    { name: 'blobs/sha256/', type: 'directory' },
    ...[...blobs].map(([digest, data]) => ({ name: `blobs/sha256/${digest.slice(7)}`, data }))
  ])
}

/**
 * A `docker save` archive in the classic layout: `<id>/layer.tar` per layer, `<hex>.json` for
 * each config, and manifest.json listing the images in the given order.
 */
export async function dockerArchive (images: TestImage[]): Promise<Buffer> {
  const members: Member[] = []
  const manifest = images.map((image, n) => {
    const config = configOf(image)
    const configName = `${sha256(config).slice(7)}.json`
    members.push({ name: configName, data: config })
    const layers = image.layers.map((l, i) => {
      const name = `${createHash('sha256').update(`${n}/${i}`).digest('hex')}/layer.tar`
      members.push({ name, data: image.gzip === true ? gzipSync(l) : l })
      return name
    })
    return { Config: configName, RepoTags: [`image${n}:latest`], Layers: layers, ...image.extra }
  })
  return await tarOf([{ name: 'manifest.json', data: JSON.stringify(manifest) }, ...members])
}

/** A layer holding a static busybox at /bin/busybox and a link per applet, for images that run. */
export async function busyboxLayer (applets: string[]): Promise<Buffer> {
  return await tarOf([
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', mode: 0o755, data: readFileSync('/bin/busybox') },
    ...applets.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', data: 'root:x:0:0:root:/root:/bin/sh\n' }
  ])
}
