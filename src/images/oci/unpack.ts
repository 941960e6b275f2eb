/**
 * Root file systems from container images and tars, unpacked in-process into a private tree:
 *
 *   unpackImage   a `docker save` archive or an OCI image layout tar: the image for the chosen
 *                 platform, every blob checked against its digest, its layers applied in order
 *   unpackTar     one tar (plain or gzip), applied like a single layer
 *
 * The tree must sit in a directory only its owner can enter (mkdtemp makes them 0700): setuid
 * files of the image pass through it, and no host user may reach them.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { indexArchive } from './archive.js'
import { applyLayer, type ApplyContext } from './apply.js'
import { ArchiveDefaults, type ArchiveLimits } from './defaults.js'
import { bytePath } from './paths.js'
import { parsePlatform, selectImage } from './select.js'
import { openRange } from './stream.js'

export interface UnpackOptions {
  /** `os/arch[/variant]`; `ArchiveDefaults.platform` when not given. */
  platform?: string
  /** The flag the archive came from (`from-oci`, `from-tar`), named in every refusal's `details.field`. */
  field?: string
  /** Lines worth telling the operator (members left out). */
  onNote?: (line: string) => void
  limits?: Partial<ArchiveLimits>
}

/** Makes `root` (0755), refusing a parent that others could enter. */
function prepareRoot (root: string): void {
  const parent = statSync(dirname(root))
  if ((parent.mode & 0o077) !== 0) {
    throw createError(ErrorCodes.INTERNAL, `an image tree must be built in a directory only its owner can enter; ${dirname(root)} has mode ${(parent.mode & 0o777).toString(8)}`)
  }
  mkdirSync(root, { recursive: true, mode: 0o755 })
}

function context (root: string, options: UnpackOptions, field: string): ApplyContext {
  return { root: bytePath(root), field, limits: { ...ArchiveDefaults, ...options.limits }, written: 0, ...(options.onNote !== undefined ? { onNote: options.onNote } : {}) }
}

/**
 * Unpacks the image of an archive, for one platform, into `root`.
 * @param archive a `docker save` tar or an OCI image layout tar, possibly gzipped
 * @returns the platform unpacked and how many layers it had
 */
export async function unpackImage (archive: string, root: string, options: UnpackOptions = {}): Promise<{ platform: string, layers: number }> {
  const field = options.field ?? 'archive'
  const want = parsePlatform(options.platform ?? ArchiveDefaults.platform)
  prepareRoot(root)
  const ctx = context(root, options, field)
  const work = mkdtempSync(join(dirname(root), '.archive-'))
  try {
    const index = await indexArchive(archive, work, field, ctx.limits)
    const plan = selectImage(index, want)
    for (const [i, layer] of plan.layers.entries()) {
      const label = `layer ${i + 1} of ${plan.layers.length}`
      const input = openRange(index.file, { start: layer.member.offset, size: layer.member.size }, field, `${label} (${layer.mediaType ?? layer.member.name})`)
      await applyLayer(ctx, input, label, layer.diffId)
    }
    return { platform: plan.platform, layers: plan.layers.length }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/** Unpacks one tar (plain or gzip) into `root`, as a single layer. */
export async function unpackTar (file: string, root: string, options: UnpackOptions = {}): Promise<void> {
  const field = options.field ?? 'archive'
  prepareRoot(root)
  await applyLayer(context(root, options, field), openRange(file, { start: 0 }, field, file), 'the tar')
}
