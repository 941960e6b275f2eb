/**
 * The guest kernel: Debian's cloud kernel package, downloaded with apt and unpacked into the
 * guest directory (never installed on the host), or a kernel the operator names. A Debian
 * kernel tree is used as long as it is there, so the node starts offline after its first time.
 *
 *   <guestDir>/kernel/<release>/boot/vmlinuz-<release>
 *   <guestDir>/kernel/<release>/lib/modules/<release>/   (with the modules.dep depmod wrote)
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, open, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createError, ErrorCodes } from '../../../errors.js'
import { MicrovmDefaults } from '../defaults.js'

const execFileP = promisify(execFile)

/** A kernel a VM boots, and the module tree that goes with it (if any). */
export interface GuestKernel {
  /** The bzImage. */
  kernel: string
  /** `uname -r` of it. */
  release: string
  /** Its `lib/modules/<release>` tree, with modules.dep; without it, what the guest needs must be built in. */
  modulesDir?: string
}

async function tool (cmd: string, args: string[], cwd?: string): Promise<string> {
  try {
    const { stdout } = await execFileP(cmd, args, { cwd, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    return stdout
  } catch (err) {
    const e = err as { stderr?: string, message: string }
    const why = (e.stderr ?? '').trim().split('\n').filter((l) => !l.startsWith('W:')).slice(-3).join(' | ') || e.message
    throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `${cmd} ${args.join(' ')} failed: ${why}`, { reason: 'guest-kernel' })
  }
}

/**
 * The version a bzImage says it is (its setup header's kernel_version string), e.g.
 * `6.1.0-57-cloud-amd64`; undefined when the file is not a bzImage.
 */
export async function bzImageRelease (path: string): Promise<string | undefined> {
  const fh = await open(path, 'r')
  try {
    const head = Buffer.alloc(0x1000)
    const { bytesRead } = await fh.read(head, 0, head.length, 0)
    if (bytesRead < 0x210 || head.toString('latin1', 0x202, 0x206) !== 'HdrS') return undefined
    const at = head.readUInt16LE(0x20e) + 0x200
    const text = Buffer.alloc(256)
    await fh.read(text, 0, text.length, at)
    const s = text.toString('latin1')
    return s.slice(0, s.search(/[\s\0]/)) || undefined
  } finally {
    await fh.close()
  }
}

/**
 * A kernel the operator names (`--kernel`), with its module tree if given.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `kernel` or `kernelModules`
 */
export async function operatorKernel (kernel: string, modulesDir?: string): Promise<GuestKernel> {
  if (!existsSync(kernel)) throw createError(ErrorCodes.INVALID_ARGUMENT, `kernel ${kernel} does not exist`, { field: 'kernel' })
  const release = await bzImageRelease(kernel)
  if (release === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `kernel ${kernel} is not a bzImage`, { field: 'kernel' })
  if (modulesDir === undefined) return { kernel, release }
  if (!existsSync(join(modulesDir, 'modules.dep'))) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${modulesDir} has no modules.dep (run depmod for it)`, { field: 'kernelModules' })
  }
  return { kernel, release, modulesDir }
}

/**
 * Debian's cloud kernel, unpacked under `dir` on first use (apt-get download, dpkg-deb -x,
 * then busybox depmod, since the package leaves modules.dep to its install script).
 * @param onProgress gets a line per step that takes a while
 * @throws WARREN_ERR_BACKEND_UNAVAILABLE when apt cannot fetch it
 */
export async function debianKernel (dir: string, onProgress: (line: string) => void = () => {}): Promise<GuestKernel> {
  const kernels = join(dir, 'kernel')
  await mkdir(kernels, { recursive: true })
  for (const release of (await readdir(kernels)).filter((n) => !n.startsWith('.')).sort().reverse()) {
    if (existsSync(join(kernels, release, '.complete'))) return treeKernel(join(kernels, release), release)
  }
  const depends = await tool('apt-cache', ['depends', MicrovmDefaults.kernelPackage])
  const pkg = /Depends:\s*(linux-image-\S+)/.exec(depends)?.[1]
  if (pkg === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `apt knows no kernel behind ${MicrovmDefaults.kernelPackage} (run apt-get update)`, { reason: 'guest-kernel' })
  const work = join(kernels, `.partial-${process.pid}`)
  await rm(work, { recursive: true, force: true })
  await mkdir(work, { recursive: true })
  try {
    onProgress(`guest kernel: downloading ${pkg}`)
    await tool('apt-get', ['download', '-q', pkg], work)
    const deb = (await readdir(work)).find((f) => f.endsWith('.deb'))
    if (deb === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `apt-get download ${pkg} left no .deb`, { reason: 'guest-kernel' })
    onProgress(`guest kernel: unpacking ${deb}`)
    const tree = join(work, 'tree')
    await tool('dpkg-deb', ['-x', join(work, deb), tree])
    const image = (await readdir(join(tree, 'boot'))).find((f) => f.startsWith('vmlinuz-'))
    if (image === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `${deb} holds no boot/vmlinuz-*`, { reason: 'guest-kernel' })
    const release = image.slice('vmlinuz-'.length)
    onProgress(`guest kernel: indexing the modules of ${release}`)
    await tool('busybox', ['depmod', '-b', tree, release])
    const final = join(kernels, release)
    await rm(final, { recursive: true, force: true })
    await rename(tree, final)
    await writeFile(join(final, '.complete'), `${deb}\n`)
    onProgress(`guest kernel: ${release} ready`)
    return treeKernel(final, release)
  } finally {
    await rm(work, { recursive: true, force: true })
  }
}

function treeKernel (root: string, release: string): GuestKernel {
  return { kernel: join(root, 'boot', `vmlinuz-${release}`), release, modulesDir: join(root, 'lib', 'modules', release) }
}
