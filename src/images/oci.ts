/**
 * Root file systems from container images: a `docker save` archive or an OCI image layout,
 * both as tar files. Their layers are applied in order onto one directory, honouring the
 * whiteouts of the OCI spec: `.wh.NAME` deletes NAME from the layers below, and a directory
 * holding `.wh..wh..opq` hides everything the layers below put in it.
 *
 * Tar handling is GNU tar's (always on Debian); we read only JSON and decide, tar unpacks.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { readdir, rm } from 'node:fs/promises'
import { join, normalize } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'
import { run } from './build.js'

const WHITEOUT = '.wh.'
const OPAQUE = '.wh..wh..opq'

/** Lists the member names of a (possibly compressed) tar file. */
function listTar (file: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', ['-tf', file], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (b: Buffer) => { out += b.toString() })
    child.stderr.on('data', (b: Buffer) => { err += b.toString() })
    child.once('close', (code) => code === 0
      ? resolve(out.split('\n').filter((l) => l !== ''))
      : reject(createError(ErrorCodes.BAD_SPEC, `${file} is not a readable tar: ${err.trim()}`)))
  })
}

/** A member path made safe: relative, normalised, never climbing out of the root. */
function safeMember (name: string): string | undefined {
  const stripped = name.replace(/^\.?\/+/, '')
  if (stripped === '' || stripped === '.') return '' // the layer's root itself
  const n = normalize(stripped)
  if (n === '..' || n.startsWith('../') || n.startsWith('/')) return undefined
  return n.replace(/\/$/, '')
}

/** Applies one layer tar onto `root`: whiteouts first, then the layer's own files. */
export async function applyLayer (root: string, layerTar: string): Promise<void> {
  const members = await listTar(layerTar)
  const exclude: string[] = []
  for (const raw of members) {
    const m = safeMember(raw)
    if (m === undefined) throw createError(ErrorCodes.BAD_SPEC, `layer ${layerTar} has a member outside its root: ${raw}`)
    if (m === '') continue
    const slash = m.lastIndexOf('/')
    const dir = slash < 0 ? '' : m.slice(0, slash)
    const base = slash < 0 ? m : m.slice(slash + 1)
    if (base === OPAQUE) {
      // Opaque: what lower layers put in this directory disappears; this layer refills it.
      const target = join(root, dir)
      for (const entry of await readdir(target).catch(() => [] as string[])) await rm(join(target, entry), { recursive: true, force: true })
      exclude.push(raw)
    } else if (base.startsWith(WHITEOUT)) {
      await rm(join(root, dir, base.slice(WHITEOUT.length)), { recursive: true, force: true })
      exclude.push(raw)
    }
  }
  const excludeArgs = exclude.flatMap((e) => ['--exclude', e])
  // --no-same-owner is wrong for a rootfs; as root, tar keeps owners, modes and device nodes.
  await run('tar', ['-xf', layerTar, '-C', root, '--numeric-owner', '--no-overwrite-dir', ...excludeArgs])
}

interface DockerManifestEntry { Layers: string[] }
interface OciIndex { manifests: Array<{ digest: string, mediaType?: string }> }
interface OciManifest { layers: Array<{ digest: string }> }

/** The layer files of an unpacked image archive, bottom first (docker save or OCI layout). */
export function imageLayers (dir: string): string[] {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as DockerManifestEntry[]
    if (Array.isArray(manifest) && manifest[0]?.Layers !== undefined) return manifest[0].Layers.map((l) => join(dir, l))
  } catch { /* not a docker save archive: try the OCI layout */ }
  try {
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as OciIndex
    const blob = (digest: string): string => join(dir, 'blobs', ...digest.split(':'))
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as OciManifest
    return manifest.layers.map((l) => blob(l.digest))
  } catch (err) {
    throw createError(ErrorCodes.BAD_SPEC, `not a docker save archive nor an OCI image layout: ${(err as Error).message}`)
  }
}

/**
 * Unpacks an image archive's layers, in order, into `root`.
 * @param archive a `docker save` tar or an OCI image layout tar
 */
export async function unpackImage (archive: string, root: string): Promise<void> {
  const staging = mkdtempSync(join(root, '..', '.oci-'))
  try {
    await run('tar', ['-xf', archive, '-C', staging])
    for (const layer of imageLayers(staging)) await applyLayer(root, layer)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}
