/**
 * What a microVM boots: the guest kernel, warren's initramfs (agent + boot modules) and the
 * kernel's whole module tree as a read-only EROFS disk (so `modprobe` works inside). Made once
 * per guest directory and reused; `prepareGuest` only checks and returns paths after that.
 */
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { BuildDefaults, run } from '../../../images/index.js'
import { ContainerDefaults } from '../../container/defaults.js'
import { buildInitramfs } from './initramfs.js'
import { debianKernel, operatorKernel, type GuestKernel } from './kernel.js'

export { writeCpio, type CpioEntry } from './cpio.js'
export { bzImageRelease, debianKernel, operatorKernel, type GuestKernel } from './kernel.js'
export { loadOrder, moduleName, parseModuleIndex, readModuleIndex, type ModuleIndex } from './modules.js'
export { buildInitramfs } from './initramfs.js'

/** The files of a guest. */
export interface GuestImage {
  kernel: string
  initrd: string
  /** `uname -r` inside. */
  release: string
  /** The module tree as an EROFS image (absent for an operator's kernel without modules). */
  modulesDisk?: string
}

export interface PrepareGuestOptions {
  /** Where the guest's files are kept. */
  dir: string
  /** The operator's kernel (bzImage) instead of Debian's. */
  kernel?: string
  /** That kernel's `lib/modules/<release>` tree (with modules.dep). */
  kernelModules?: string
  /** The agent binary that becomes /init (default the container agent's). */
  agentPath?: string
  /** A line per slow step (download, unpack, disk build). */
  onProgress?: (line: string) => void
}

/**
 * The guest's files, made where missing.
 * @throws WARREN_ERR_BACKEND_UNAVAILABLE (no kernel could be had), WARREN_ERR_UNSUPPORTED (the
 *   kernel lacks a module the guest needs), WARREN_ERR_INVALID_ARGUMENT (a bad operator kernel)
 */
export async function prepareGuest (opts: PrepareGuestOptions): Promise<GuestImage> {
  await mkdir(opts.dir, { recursive: true })
  const progress = opts.onProgress ?? (() => {})
  const kernel: GuestKernel = opts.kernel !== undefined
    ? await operatorKernel(opts.kernel, opts.kernelModules)
    : await debianKernel(opts.dir, progress)
  const initrd = await buildInitramfs(kernel, opts.agentPath ?? ContainerDefaults.agentPath, opts.dir)
  const modulesDisk = kernel.modulesDir !== undefined ? await modulesImage(kernel.modulesDir, kernel.release, opts.dir, progress) : undefined
  return { kernel: kernel.kernel, initrd, release: kernel.release, ...(modulesDisk !== undefined ? { modulesDisk } : {}) }
}

/** The module tree as an EROFS image (lz4: it is read rarely, and a third of the size), once per tree. */
async function modulesImage (modulesDir: string, release: string, dir: string, progress: (line: string) => void): Promise<string> {
  const key = createHash('sha256').update(await readFile(join(modulesDir, 'modules.dep'))).digest('hex').slice(0, 12)
  const path = join(dir, `modules-${release}-${key}.erofs`)
  if (existsSync(path)) return path
  progress(`guest kernel: building the module disk of ${release}`)
  const tmp = `${path}.${process.pid}.tmp`
  try {
    await run(BuildDefaults.mkfs, ['--quiet', '-zlz4', '--all-root', `-T${BuildDefaults.epoch}`, `-U${BuildDefaults.uuid}`, tmp, modulesDir])
    await rename(tmp, path)
  } finally {
    await rm(tmp, { force: true })
  }
  return path
}
