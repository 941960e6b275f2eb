/**
 * The default base layer: a static busybox and just enough of a root file system around it, so
 * a container sandbox works with no image named.
 */
import { execFile } from 'node:child_process'
import { chmod, copyFile, mkdir, open, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createError, ErrorCodes } from '../errors.js'
import { makeErofsImage } from './build.js'

const run = promisify(execFile)

/** The static busybox the layer is made of (Debian busybox-static). */
const BUSYBOX = '/bin/busybox'

/**
 * Builds an EROFS image of `srcDir` at `outFile` (written beside it, then renamed into place,
 * so a reader never sees half an image). Every file is owned by root and timestamps are zeroed,
 * so the same tree gives the same bytes.
 * @returns outFile
 */
export async function buildErofsLayer (srcDir: string, outFile: string): Promise<string> {
  try {
    await makeErofsImage(srcDir, outFile)
  } catch (err) {
    const missing = (err as Error).message.includes('could not start')
    throw createError(missing ? ErrorCodes.UNSUPPORTED : ErrorCodes.INTERNAL, `building a layer from ${srcDir} failed: ${(err as Error).message}`, { srcDir })
  }
  return outFile
}

/** True when the ELF file has no program interpreter, i.e. runs without a dynamic loader. */
async function isStaticElf (path: string): Promise<boolean> {
  const fh = await open(path, 'r')
  try {
    const head = Buffer.alloc(64)
    await fh.read(head, 0, 64, 0)
    if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2) return false // ELF64 only
    const phoff = Number(head.readBigUInt64LE(32))
    const phentsize = head.readUInt16LE(54)
    const phnum = head.readUInt16LE(56)
    const table = Buffer.alloc(phentsize * phnum)
    await fh.read(table, 0, table.length, phoff)
    for (let i = 0; i < phnum; i++) if (table.readUInt32LE(i * phentsize) === 3) return false // PT_INTERP
    return true
  } finally {
    await fh.close()
  }
}

/**
 * The default base layer: a static busybox with a symlink per applet (sh, ls, cat, ps, ...) in
 * /bin, /etc/passwd and /etc/group (root, nobody, and `sandbox` with uid 1000), and the
 * directories a sandbox mounts over or expects (/proc, /dev, /sys, /tmp, /root, /mnt).
 * Built once into `dir/busybox.erofs` and reused while newer than the busybox binary.
 * @returns the image's path
 */
export async function buildBusyboxLayer (dir: string): Promise<string> {
  const image = join(dir, 'busybox.erofs')
  const busybox = BUSYBOX
  const source = await stat(busybox).catch(() => undefined)
  if (source === undefined) {
    throw createError(ErrorCodes.UNSUPPORTED, `${busybox} is missing (Debian package busybox-static)`, { path: busybox })
  }
  const built = await stat(image).catch(() => undefined)
  if (built !== undefined && built.mtimeMs >= source.mtimeMs) return image
  if (!await isStaticElf(busybox)) {
    throw createError(ErrorCodes.UNSUPPORTED, `${busybox} is dynamically linked; install busybox-static`, { path: busybox })
  }
  const root = join(dir, `busybox.rootfs.${process.pid}`)
  await rm(root, { recursive: true, force: true })
  try {
    for (const d of ['bin', 'etc', 'proc', 'dev', 'sys', 'root', 'mnt', 'home/sandbox']) await mkdir(join(root, d), { recursive: true })
    await mkdir(join(root, 'tmp'))
    await chmod(join(root, 'tmp'), 0o1777)
    await chmod(join(root, 'root'), 0o700)
    await copyFile(busybox, join(root, 'bin', 'busybox'))
    await chmod(join(root, 'bin', 'busybox'), 0o755)
    const { stdout } = await run(busybox, ['--list'])
    for (const applet of stdout.split('\n')) {
      if (applet === '' || applet === 'busybox' || applet.includes('/')) continue
      await symlink('busybox', join(root, 'bin', applet))
    }
    await writeFile(join(root, 'etc', 'passwd'),
      'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n')
    await writeFile(join(root, 'etc', 'group'), 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n')
    await buildErofsLayer(root, image)
    return image
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}
