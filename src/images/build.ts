/**
 * Building layers: a directory tree becomes one read-only EROFS image (mkfs.erofs), named by the
 * sha256 of its bytes. Fixed timestamp and UUID make the build deterministic: the same tree
 * gives the same digest, so one tool update touches one layer and caches stay valid.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createReadStream, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
// The one mountinfo parser lives with the cgroup code that first needed it.
import { parseMountinfo } from '../backends/container/cgroups/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { pinErofsBuildTime } from './erofs-superblock.js'

export interface Layer {
  /** `sha256:<hex>` of the image bytes. */
  digest: string
  /** Where the image file lives. */
  path: string
  bytes: number
}

export const BuildDefaults = {
  mkfs: 'mkfs.erofs',
  debootstrap: 'debootstrap',
  mirror: 'http://deb.debian.org/debian',
  /** The timestamp every file gets, for reproducible images. */
  epoch: 0,
  uuid: '00000000-0000-0000-0000-000000000000'
}

/** Runs a command; rejects with its stderr tail when it fails. */
export function run (cmd: string, args: string[], onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let tail = ''
    const take = (b: Buffer): void => {
      const text = b.toString()
      tail = (tail + text).slice(-4000)
      if (onLine !== undefined) for (const line of text.split('\n')) if (line.trim() !== '') onLine(line)
    }
    child.stdout.on('data', take)
    child.stderr.on('data', take)
    child.once('error', (err) => reject(createError(ErrorCodes.INTERNAL, `${cmd} could not start: ${err.message}`)))
    child.once('close', (code) => code === 0 ? resolve() : reject(createError(ErrorCodes.INTERNAL, `${cmd} failed (exit ${code}): ${tail.trim().split('\n').slice(-5).join(' | ')}`)))
  })
}

/** The sha256 of a file, as `sha256:<hex>`. */
export function digestFile (path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256')
    createReadStream(path).on('data', (b) => hash.update(b)).once('error', reject).once('end', () => resolve(`sha256:${hash.digest('hex')}`))
  })
}

/** How `makeErofsImage` treats the tree. */
export interface ErofsImageOptions {
  /**
   * Keep the tree as it is: owners, modes, every file's mtime, xattrs (overlay's opaque marks),
   * whiteouts, hardlinks: what a snapshot of a writable layer needs. Default false: an image
   * built from a directory on the build machine, every file owned by root and stamped `epoch`.
   */
  preserve?: boolean
  /** Paths left out, as regular expressions over the path relative to the tree (no leading `/`). */
  excludeRegex?: readonly string[]
}

/**
 * Writes an EROFS image of `srcDir` to `outFile`, reproducibly: a fixed UUID and build time, and
 * (unless `preserve`) every file owned by root with one fixed timestamp. Written beside and
 * renamed, so a reader never sees half an image.
 */
export async function makeErofsImage (srcDir: string, outFile: string, opts: ErofsImageOptions = {}): Promise<void> {
  const tmp = `${outFile}.${process.pid}.tmp`
  // -T gives every file the build time; with preserve every inode is extended (holding its own
  // mtime), and the build time is fixed afterwards in the superblock (erofs-superblock.ts).
  const mode = opts.preserve === true ? ['-Eforce-inode-extended'] : ['--all-root', `-T${BuildDefaults.epoch}`]
  const excludes = (opts.excludeRegex ?? []).map((r) => `--exclude-regex=${r}`)
  try {
    await run(BuildDefaults.mkfs, ['--quiet', ...mode, `-U${BuildDefaults.uuid}`, ...excludes, tmp, srcDir])
    if (opts.preserve === true) await pinErofsBuildTime(tmp, BuildDefaults.epoch)
    renameSync(tmp, outFile)
  } finally {
    rmSync(tmp, { force: true })
  }
}

let builds = 0

/**
 * Builds an EROFS image of `dir` into `storeDir/<hex>.erofs`.
 * @returns the layer; building the same tree twice returns the same digest
 */
export async function buildLayerFromDir (dir: string, storeDir: string, opts: ErofsImageOptions = {}): Promise<Layer> {
  mkdirSync(storeDir, { recursive: true })
  // Several builds may run at once in one process (snapshots of different sandboxes).
  const tmp = join(storeDir, `.build-${process.pid}-${++builds}.erofs`)
  try {
    await makeErofsImage(dir, tmp, opts)
    const digest = await digestFile(tmp)
    const path = join(storeDir, `${digest.slice('sha256:'.length)}.erofs`)
    renameSync(tmp, path)
    return { digest, path, bytes: statSync(path).size }
  } finally {
    rmSync(tmp, { force: true })
  }
}

/** Detaches every mount at or below `dir` (deepest first), so the tree can be removed. */
export async function unmountUnder (dir: string): Promise<void> {
  const text = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '')
  const below = parseMountinfo(text).map((m) => m.mountPoint).filter((p) => p === dir || p.startsWith(`${dir}/`))
  for (const point of below.sort((a, b) => b.length - a.length)) await run('umount', ['-l', point]).catch(() => {})
}

/**
 * Makes a Debian root tree with debootstrap (minbase plus `include`), once: the tree is cached
 * under `cacheDir` by suite and package list, so later builds cost nothing.
 */
export async function debootstrapTree (cacheDir: string, suite: string, include: string[], onLine?: (line: string) => void): Promise<string> {
  const key = createHash('sha256').update(`${suite}\0${[...include].sort().join(',')}`).digest('hex').slice(0, 16)
  const dir = join(cacheDir, `debootstrap-${suite}-${key}`)
  try {
    if (statSync(join(dir, '.complete')).isFile()) return dir
  } catch { /* not built yet */ }
  const partial = `${dir}.partial`
  // A debootstrap that was interrupted leaves its /proc (and more) mounted in the tree.
  await unmountUnder(partial)
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(cacheDir, { recursive: true })
  const args = ['--variant=minbase', ...(include.length > 0 ? [`--include=${include.join(',')}`] : []), suite, partial, BuildDefaults.mirror]
  await run(BuildDefaults.debootstrap, args, onLine)
  // apt caches and logs are not part of an environment.
  for (const junk of ['var/cache/apt/archives', 'var/lib/apt/lists', 'var/log']) rmSync(join(partial, junk), { recursive: true, force: true })
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  writeFileSync(join(dir, '.complete'), '')
  return dir
}
