/**
 * Bounds on what an image archive may make warren hold, and the platform chosen when none is
 * named. Every size read from an archive is checked against one of these before it is used, so
 * a hostile archive fails with a clear error instead of exhausting memory or disk.
 */
import { createError, ErrorCodes, type ErrorCode } from '../../errors.js'

export const ArchiveDefaults = {
  /** The platform an image is taken for when the archive holds several. */
  platform: 'linux/amd64',
  /** The largest JSON document read (index.json, manifest.json, a manifest, a config). */
  maxJsonBytes: 4 * 1024 * 1024,
  /** The most members one layer tar may have. */
  maxMembers: 1_000_000,
  /** The most members the outer archive may have (a few per layer; each is remembered). */
  maxArchiveMembers: 65_536,
  /** The longest member path or link target, in bytes (Linux's PATH_MAX). */
  maxPathBytes: 4096,
  /** The most bytes of member paths one layer may name in all (what is remembered per layer). */
  maxLayerPathBytes: 256 * 1024 * 1024,
  /** The most bytes an archive may unpack to: the outer tar decompressed, and the files of the tree. */
  maxTreeBytes: 64 * 1024 * 1024 * 1024,
  /** The most layers an image may have. */
  maxLayers: 256,
  /** The most manifests an index (or images a docker manifest.json) may list. */
  maxManifests: 1024,
  /** How deep image indexes may nest. */
  maxIndexDepth: 4,
  /** Symlinks followed while resolving one path inside the root (Linux's MAXSYMLINKS). */
  maxSymlinkHops: 40
}

export type ArchiveLimits = typeof ArchiveDefaults

/**
 * An error about an archive the caller gave: `details.field` names the flag it came from
 * (`from-oci`, `from-tar`, `platform`), as every refusal a user sees does.
 */
export function archiveError (field: string, message: string, details: Record<string, unknown> = {}, code: ErrorCode = ErrorCodes.BAD_SPEC): Error {
  return createError(code, message, { field, ...details })
}
