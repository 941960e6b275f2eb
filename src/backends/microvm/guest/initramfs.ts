/**
 * The initramfs warren makes for its guests: the agent as /init, the kernel modules it needs to
 * reach its disks and serial port (in load order, dependencies first), and /dev/console so PID 1
 * has somewhere to say why a boot failed. Named by the sha256 of its bytes, so a new agent or
 * kernel gives a new file and an unchanged one is not rewritten.
 */
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { MicrovmDefaults } from '../defaults.js'
import { writeCpio, type CpioEntry } from './cpio.js'
import type { GuestKernel } from './kernel.js'
import { loadOrder, readModuleIndex } from './modules.js'

/**
 * Writes (once) the initramfs for `kernel` with the agent at `agentPath` into `dir`.
 * @returns its path, `dir/initramfs-<hash>.cpio`
 * @throws WARREN_ERR_UNSUPPORTED when the kernel lacks a module the guest needs
 */
export async function buildInitramfs (kernel: GuestKernel, agentPath: string, dir: string): Promise<string> {
  const entries: CpioEntry[] = [
    { type: 'dir', path: 'dev' },
    { type: 'char', path: 'dev/console', major: 5, minor: 1, mode: 0o600 },
    { type: 'dir', path: 'proc', mode: 0o555 },
    { type: 'dir', path: 'sys', mode: 0o555 },
    { type: 'file', path: 'init', data: await readFile(agentPath), mode: 0o755 }
  ]
  if (kernel.modulesDir !== undefined) {
    const order = loadOrder(await readModuleIndex(kernel.modulesDir), MicrovmDefaults.bootModules)
    entries.push({ type: 'dir', path: 'modules' })
    for (const m of order) entries.push({ type: 'file', path: `modules/${m.name}.ko`, data: await readFile(join(kernel.modulesDir, m.file)) })
    entries.push({ type: 'file', path: 'modules/order', data: Buffer.from(order.map((m) => `${m.name}\n`).join('')) })
  }
  const bytes = writeCpio(entries)
  const name = `initramfs-${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.cpio`
  const path = join(dir, name)
  if (!existsSync(path)) {
    const tmp = `${path}.${process.pid}.tmp`
    await writeFile(tmp, bytes)
    await rename(tmp, path)
  } else {
    // In use from now on: its age is told from here (see below).
    const now = new Date()
    await utimes(path, now, now)
  }
  // Another build's initramfs may be another node's, on a guest dir nodes share, and it reads it at
  // every VM start: only those no node has prepared for a while go.
  const old = Date.now() - MicrovmDefaults.initramfsKeepMs
  for (const f of await readdir(dir)) {
    if (!/^initramfs-[0-9a-f]{16}\.cpio$/.test(f) || f === name) continue
    const at = await stat(join(dir, f)).then((st) => st.mtimeMs, () => Date.now())
    if (at < old) await rm(join(dir, f), { force: true })
  }
  return path
}
