/**
 * Cutting a container sandbox's file system into an EROFS layer (`Backend.snapshot`).
 *
 * Plain: the writable layer, overlay's upper directory `u`, as it is: owners, modes, mtimes,
 * xattrs (`trusted.overlay.opaque` on a directory removed and made again), whiteouts (char
 * devices 0:0 for what was deleted from the layers below), symlinks, hardlinks, empty
 * directories. Stacked on the sandbox's layers it gives back the sandbox's tree, because it is
 * exactly what overlayfs would have stacked. Flattened: everything the sandbox sees, its layers
 * and its writes merged, as one layer that stands alone; the other mounts of the sandbox (/proc,
 * /sys, /dev, its egress binding) are left out, found in its own mountinfo.
 *
 * The tree is first copied (`cp -a`: it keeps all of the above) into a staging directory beside
 * the layer store, with the sandbox frozen; mkfs.erofs then runs on the copy with the sandbox
 * running again. The copy is not optional: mkfs.erofs resolves its source with realpath(3), and
 * the only paths to a sandbox's upper (through its agent's descriptor, /proc/<pid>/fd/5) or root
 * (/proc/<pid>/root) are magic links whose text names a path in another mount namespace: resolved,
 * they would point at the host's own `/`. cp opens the path as given. It also keeps the freeze to
 * the copy alone.
 */
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, statfs } from 'node:fs/promises'
import { join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import { buildLayerFromDir, run } from '../../images/index.js'
import type { SnapshotLayer } from '../types.js'
import { parseMountinfo } from './cgroups/mountinfo.js'
import { ContainerDefaults } from './defaults.js'
import { upperPath, type LaunchedSandbox } from './launcher.js'

/** What `cutSnapshot` needs besides the sandbox. */
export interface CutOptions {
  /** One layer of the whole tree the sandbox sees, instead of its writes alone. */
  flatten?: boolean
  /** Runs the copy with the sandbox frozen (and thaws after, unless it was paused). */
  whileFrozen: <T>(work: () => Promise<T>) => Promise<T>
  /** The most bytes the tree may hold (apparent sizes: a sparse file counts whole, as it is written). */
  maxBytes?: number
}

/**
 * Cuts a sandbox's writable layer (or, with `flatten`, its whole tree) into a layer in `storeDir`
 * (`<hex>.erofs`, so the store resolves `sha256:<hex>` to it). The same tree gives the same digest.
 * @throws WARREN_ERR_QUOTA when the tree holds more than `maxBytes`
 */
export async function cutSnapshot (sb: LaunchedSandbox, storeDir: string, opts: CutOptions): Promise<SnapshotLayer> {
  // With `diskMiB` the writable layer is a tmpfs of that size in the sandbox's mounts, reached
  // through its agent's descriptor; without, a directory on the host's disk (no bound of its own).
  const disk = opts.flatten === true ? undefined : await statfs(upperPath(sb)).then((s) => s.type === TMPFS_MAGIC ? s.blocks * s.bsize : undefined, () => undefined)
  return await buildStagedLayer(storeDir, async (stage) =>
    await opts.whileFrozen(async () => opts.flatten === true ? await stageRoot(sb, stage) : await stageUpper(sb, stage)),
  snapshotBound(opts.maxBytes, disk))
}

const SLASH = Buffer.from('/')

/** statfs(2)'s f_type of a tmpfs. */
const TMPFS_MAGIC = 0x01021994

/** Whole writes past their disk: `buildStagedLayer`'s refusal names the limit. */
export interface SnapshotBound { maxBytes: number, field?: string }

/**
 * What one snapshot may hold: at most `maxBytes` (default `ContainerDefaults.snapshotMaxBytes`)
 * and, when the size of the sandbox's writable layer is known, no more than fits on it. Sparse
 * files count whole (mkfs.erofs writes them out), so a 4 GiB hole in a 256 MiB disk is refused
 * rather than turned into 4 GiB of zeros in the blob store.
 */
export function snapshotBound (maxBytes: number | undefined, diskBytes: number | undefined): SnapshotBound {
  const most = maxBytes ?? ContainerDefaults.snapshotMaxBytes
  return diskBytes !== undefined && diskBytes > 0 && diskBytes < most ? { maxBytes: diskBytes, field: 'limits.diskMiB' } : { maxBytes: most }
}

/** The refusal of a snapshot past its bound (the staged tree's size, or a VM's stream). */
export function tooLargeToSnapshot ({ maxBytes, field }: SnapshotBound): Error {
  const over = field !== undefined ? `more than its disk (${field}) holds` : 'too large to snapshot'
  return createError(ErrorCodes.QUOTA, `the sandbox's files come to over ${maxBytes} bytes (sparse files count whole): ${over}`, { maxBytes, ...(field !== undefined ? { field } : {}) })
}

/**
 * The one builder of snapshot layers, for containers and VMs alike: `fill` puts the tree into a
 * fresh staging directory beside the layer store (returning what to exclude, as mkfs.erofs
 * regular expressions), the tree's size is checked, and the layer is built from it with
 * owners, modes, xattrs and device nodes kept. The staging directory is removed whatever happens.
 * @throws WARREN_ERR_QUOTA when the tree holds more than `maxBytes` (default `ContainerDefaults.snapshotMaxBytes`)
 */
export async function buildStagedLayer (storeDir: string, fill: (stage: string) => Promise<string[]>, bound: SnapshotBound = snapshotBound(undefined, undefined)): Promise<SnapshotLayer> {
  // The copy goes one level down: its top gets the mode of the sandbox's root, which the
  // sandbox chooses, while this directory stays 0700, so no host user reaches a setuid file or a
  // device node the sandbox made (it is root inside) while it sits on the host.
  const guard = await mkdtemp(join(storeDir, '.stage-'))
  const stage = join(guard, 'tree')
  try {
    await mkdir(stage)
    const excludes = await fill(stage)
    if (await treeBytes(stage, bound.maxBytes) > bound.maxBytes) throw tooLargeToSnapshot(bound)
    return await buildLayerFromDir(stage, storeDir, { preserve: true, excludeRegex: excludes })
  } finally {
    await rm(guard, { recursive: true, force: true })
  }
}

/** Copies the writable layer; nothing to exclude. */
async function stageUpper (sb: LaunchedSandbox, stage: string): Promise<string[]> {
  await run('cp', ['-a', '--', `${upperPath(sb)}/.`, `${stage}/`])
  return []
}

/**
 * Copies the sandbox's root file system (`-x`: no other mount is entered) and returns, for the
 * image, what to leave out under each other mount point as its mountinfo lists them (a bind
 * mount from the same file system is not stopped by `-x`). The mount points stay, empty.
 */
async function stageRoot (sb: LaunchedSandbox, stage: string): Promise<string[]> {
  const mounts = parseMountinfo(await readFile(`/proc/${sb.pid}/mountinfo`, 'utf8'))
  await run('cp', ['-ax', '--', `/proc/${sb.pid}/root/.`, `${stage}/`])
  const points = [...new Set(mounts.map((m) => m.mountPoint).filter((p) => p.startsWith('/') && p !== '/'))].sort()
  // A mount below another one is left out with it.
  const outer = points.filter((p) => !points.some((q) => q !== p && p.startsWith(`${q}/`)))
  return outer.map((p) => `^${escapeRegex(p.slice(1))}/`)
}

/** A literal path as a POSIX extended regular expression. */
function escapeRegex (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Apparent bytes of the regular files under `dir` (a hardlinked file once); counting stops once past `limit`. */
async function treeBytes (dir: string, limit: number): Promise<number> {
  let total = 0
  const linked = new Set<number>()
  // Names as bytes: a sandbox's file names need not be UTF-8, and a decoded one names no file.
  const pending: Buffer[] = [Buffer.from(dir)]
  while (pending.length > 0 && total <= limit) {
    const d = pending.pop()!
    for (const e of await readdir(d, { withFileTypes: true, encoding: 'buffer' })) {
      const p = Buffer.concat([d, SLASH, e.name])
      if (e.isDirectory()) { pending.push(p); continue }
      if (!e.isFile()) continue
      const st = await lstat(p)
      if (st.nlink > 1) {
        if (linked.has(st.ino)) continue
        linked.add(st.ino)
      }
      total += st.size
    }
  }
  return total
}
