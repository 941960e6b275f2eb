/**
 * Which image of an archive to unpack, and its layers, each checked against its digest. An OCI
 * image layout is walked from index.json through nested image indexes to image manifests; a
 * `docker save` archive lists its images in manifest.json. The image for the wanted platform is
 * taken (linux/amd64 unless told); none or several is a clear error naming what there is.
 */
import { ErrorCodes } from '../../errors.js'
import { isDigest } from '../blob/index.js'
import { memberOf, readJson, verify, type ArchiveIndex, type ArchiveMember } from './archive.js'
import { archiveError } from './defaults.js'

export interface Platform { os: string, architecture: string, variant?: string }

/** One layer to apply: its bytes in the archive and what its uncompressed tar must hash to. */
export interface PlannedLayer {
  member: ArchiveMember
  /** `sha256:…` of the uncompressed tar (the config's diff_id). */
  diffId: string
  /** The layer's media type, where the archive says it. */
  mediaType?: string
}

export interface ImagePlan { platform: string, layers: PlannedLayer[] }

/** One image found in the archive. */
interface Candidate { platform: Platform, label: string, manifestDigest: string, layers: () => PlannedLayer[] }

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `os/arch[/variant]` as a platform. */
export function parsePlatform (text: string): Platform {
  const m = /^([a-z0-9_]+)\/([a-z0-9_]+)(?:\/([a-z0-9_]+))?$/.exec(text)
  if (m === null) throw archiveError('platform', `--platform must be os/arch[/variant] (e.g. linux/amd64), not ${JSON.stringify(text)}`, {}, ErrorCodes.INVALID_ARGUMENT)
  return { os: m[1]!, architecture: m[2]!, ...(m[3] !== undefined ? { variant: m[3] } : {}) }
}

export const platformText = (p: Platform): string => `${p.os}/${p.architecture}${p.variant !== undefined ? `/${p.variant}` : ''}`

/** True when `have` is what `want` asks for; a want without a variant takes any (arm64 is v8 when unsaid). */
function matches (want: Platform, have: Platform): boolean {
  if (want.os !== have.os || want.architecture !== have.architecture) return false
  const variant = have.variant ?? (have.architecture === 'arm64' ? 'v8' : undefined)
  return want.variant === undefined || want.variant === variant
}

/** The platform a config (or descriptor) says, if it says one. */
function platformOf (v: unknown): Platform | undefined {
  if (!isObject(v) || typeof v.os !== 'string' || typeof v.architecture !== 'string') return undefined
  return { os: v.os, architecture: v.architecture, ...(typeof v.variant === 'string' ? { variant: v.variant } : {}) }
}

const BLOB = (digest: string): string => `blobs/${digest.replace(':', '/')}`

/** The blob a descriptor names, verified; undefined when the archive does not hold it. */
function blob (index: ArchiveIndex, descriptor: unknown, what: string): ArchiveMember | undefined {
  if (!isObject(descriptor) || typeof descriptor.digest !== 'string') throw archiveError(index.field, `${what} is not a descriptor with a digest`)
  const m = memberOf(index, BLOB(descriptor.digest))
  if (m !== undefined) verify(index, m, descriptor.digest, descriptor.size, `${what} ${descriptor.digest}`)
  return m
}

function required (index: ArchiveIndex, m: ArchiveMember | undefined, what: string): ArchiveMember {
  if (m === undefined) throw archiveError(index.field, `${what} is not in the archive`)
  return m
}

/** A config's diff_ids, one per layer. */
function diffIds (index: ArchiveIndex, config: unknown, layers: number, what: string): string[] {
  const ids = isObject(config) && isObject(config.rootfs) ? config.rootfs.diff_ids : undefined
  if (!Array.isArray(ids) || ids.length !== layers || !ids.every((d) => isDigest(d))) {
    throw archiveError(index.field, `${what}'s config does not list one sha256 diff_id for each of its ${layers} layers`)
  }
  return ids as string[]
}

function layerList (index: ArchiveIndex, list: unknown, what: string): unknown[] {
  if (!Array.isArray(list)) throw archiveError(index.field, `${what} lists no layers`)
  if (list.length > index.limits.maxLayers) throw archiveError(index.field, `${what} has ${list.length} layers, more than ${index.limits.maxLayers}`)
  return list
}

/** The images of an OCI image layout, through nested indexes. */
function ociCandidates (index: ArchiveIndex, top: ArchiveMember): Candidate[] {
  const found: Candidate[] = []
  const walk = (doc: unknown, depth: number, where: string): void => {
    const manifests = isObject(doc) ? doc.manifests : undefined
    if (!Array.isArray(manifests)) throw archiveError(index.field, `${where} lists no manifests`)
    if (manifests.length > index.limits.maxManifests) throw archiveError(index.field, `${where} lists ${manifests.length} manifests, more than ${index.limits.maxManifests}`)
    for (const d of manifests) {
      const m = blob(index, d, `a manifest in ${where}`)
      if (m === undefined) continue // another platform's image, left out when the archive was made
      const doc = readJson(index, m)
      if (isObject(doc) && Array.isArray(doc.manifests)) {
        if (depth >= index.limits.maxIndexDepth) throw archiveError(index.field, `image indexes nest deeper than ${index.limits.maxIndexDepth}`)
        walk(doc, depth + 1, `index ${m.digest}`)
        continue
      }
      if (!isObject(doc) || !Array.isArray(doc.layers)) continue // not an image (e.g. an artifact)
      const configMember = required(index, blob(index, doc.config, `the config of manifest ${m.digest}`), `the config of manifest ${m.digest}`)
      const config = readJson(index, configMember)
      const platform = platformOf((d as Json).platform) ?? platformOf(config)
      if (platform === undefined) continue
      const label = `${platformText(platform)} (manifest ${m.digest})`
      found.push({
        platform, label, manifestDigest: m.digest,
        layers: () => {
          const layers = layerList(index, doc.layers, `manifest ${m.digest}`)
          const ids = diffIds(index, config, layers.length, `manifest ${m.digest}`)
          return layers.map((l, i) => ({
            member: required(index, blob(index, l, `layer ${i + 1} of manifest ${m.digest}`), `layer ${i + 1} of manifest ${m.digest}`),
            diffId: ids[i]!,
            ...(isObject(l) && typeof l.mediaType === 'string' ? { mediaType: l.mediaType } : {})
          }))
        }
      })
    }
  }
  walk(readJson(index, top), 0, 'index.json')
  return found
}

/** The images of a `docker save` archive. Its configs are named by their digests; its layers are checked against the configs' diff_ids. */
function dockerCandidates (index: ArchiveIndex, top: ArchiveMember): Candidate[] {
  const list = readJson(index, top)
  if (!Array.isArray(list)) throw archiveError(index.field, 'manifest.json is not a list of images')
  if (list.length > index.limits.maxManifests) throw archiveError(index.field, `manifest.json lists ${list.length} images, more than ${index.limits.maxManifests}`)
  return list.map((entry, n) => {
    const what = `image ${n + 1} of manifest.json`
    if (!isObject(entry) || typeof entry.Config !== 'string') throw archiveError(index.field, `${what} names no config`)
    const hex = /^(?:blobs\/sha256\/)?([0-9a-f]{64})(?:\.json)?$/.exec(entry.Config)?.[1]
    if (hex === undefined) throw archiveError(index.field, `${what}'s config ${JSON.stringify(entry.Config)} is not named by its digest, so it cannot be checked`)
    const configMember = required(index, memberOf(index, entry.Config), `${what}'s config`)
    verify(index, configMember, `sha256:${hex}`, undefined, `${what}'s config`)
    const config = readJson(index, configMember)
    const platform = platformOf(config) ?? { os: 'linux', architecture: 'amd64' }
    const tags = Array.isArray(entry.RepoTags) ? entry.RepoTags.filter((t): t is string => typeof t === 'string').slice(0, 3) : []
    return {
      platform, label: `${platformText(platform)} (${tags.length > 0 ? tags.join(', ') : `config sha256:${hex}`})`, manifestDigest: `sha256:${hex}`,
      layers: () => {
        const layers = layerList(index, entry.Layers, what)
        const ids = diffIds(index, config, layers.length, what)
        return layers.map((l, i) => {
          if (typeof l !== 'string') throw archiveError(index.field, `layer ${i + 1} of ${what} is not a member name`)
          const member = required(index, memberOf(index, l), `layer ${i + 1} of ${what} (${l})`)
          // Newer docker names layers blobs/sha256/<digest of the blob>: that is checked here; the diff_id while it is read.
          const named = /^blobs\/sha256\/([0-9a-f]{64})$/.exec(l)?.[1]
          if (named !== undefined) verify(index, member, `sha256:${named}`, undefined, `layer ${i + 1} of ${what}`)
          return { member, diffId: ids[i]! }
        })
      }
    }
  })
}

/**
 * Chooses the image for `want` and lists its layers, bottom first, every blob on the way
 * (indexes, manifests, configs, layers) checked against the digest it is named by.
 */
export function selectImage (index: ArchiveIndex, want: Platform): ImagePlan {
  const oci = memberOf(index, 'index.json')
  const docker = memberOf(index, 'manifest.json')
  if (oci === undefined && docker === undefined) throw archiveError(index.field, 'not a docker save archive nor an OCI image layout: it has no regular index.json or manifest.json')
  // Docker 25 writes both; the OCI index names its blobs by digest, so it is read first.
  const candidates = oci !== undefined ? ociCandidates(index, oci) : dockerCandidates(index, docker!)
  const chosen = candidates.filter((c) => matches(want, c.platform))
  const distinct = [...new Map(chosen.map((c) => [c.manifestDigest, c])).values()]
  const wanted = platformText(want)
  if (distinct.length === 0) {
    const available = [...new Set(candidates.map((c) => platformText(c.platform)))]
    throw archiveError('platform', `the archive has no image for ${wanted}; it has ${available.length > 0 ? available.join(', ') : 'none'} (choose one with --platform)`, { platform: wanted, available })
  }
  if (distinct.length > 1) {
    throw archiveError('platform', `the archive holds ${distinct.length} images for ${wanted}: ${distinct.map((c) => c.label).join('; ')}; keep one in the archive`, { platform: wanted })
  }
  return { platform: platformText(distinct[0]!.platform), layers: distinct[0]!.layers() }
}
