/**
 * Saved VMs to start new ones from ("templates"): per shape (layer stack, vCPUs, memory, disk,
 * processes, guest image), a VM is booted once with its RAM in a file, its machine state saved
 * beside it (vm-state.ts), and it is ended; every later VM of that shape is QEMU started with
 * `-incoming` from the state and the RAM file mapped private. Restored VMs share the pages of
 * that file they have not written: their memory is mostly the template's, counted once.
 *
 * The files live on a ramfs this backend mounts. Not tmpfs, and not a disk file system: QEMU 7.2
 * answers a guest's free page reports by punching holes into the RAM file even when it maps it
 * private (physmem's ram_block_discard_range), which would cut pages out from under every other
 * VM restored from it; ramfs has no hole punching, so those reports fail and the file stays as
 * it was saved. (A restored VM so keeps the pages it freed; a booted one gives them back.)
 *
 * Bounded: at most `max` templates, the least recently used removed past it (VMs restored from
 * it keep their mapping: a removed file lives until its last VM ends).
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, readdir, rm, rmdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { run } from '../../images/index.js'

/** One saved VM: its RAM and its machine state. */
export interface VmTemplate {
  readonly key: string
  /** The guest's RAM (the memory backend's file). */
  readonly memoryFile: string
  /** The machine state without the RAM (QEMU's migration stream). */
  readonly stateFile: string
}

/** Makes a template: boots a VM whose RAM is `memoryFile` (shared) and saves its state to `stateFile`. */
export type TemplateBuilder = (files: { memoryFile: string, stateFile: string }) => Promise<void>

export interface TemplateStore {
  /** The template for `key`, made by `build` the first time (once, however many ask at once). */
  get (key: string, build: TemplateBuilder): Promise<VmTemplate>
  /** Templates made and kept. */
  readonly size: number
  /**
   * Removes every template and the mount, this store's and any a previous process left there
   * (VMs restored from them keep their pages until they end). Later `get`s mount again.
   */
  clear (): Promise<void>
  /** `clear`, and later `get`s fail. */
  close (): Promise<void>
}

/** A short stable name for a template's shape. */
export function templateKey (shape: unknown): string {
  return createHash('sha256').update(JSON.stringify(shape)).digest('hex').slice(0, 24)
}

/** True when `dir` is a ramfs mount point (read from /proc/self/mountinfo, octal escapes and all). */
function isRamfs (dir: string): boolean {
  const text = existsSync('/proc/self/mountinfo') ? readFileSync('/proc/self/mountinfo', 'utf8') : ''
  for (const line of text.split('\n')) {
    const [mount, rest] = line.split(' - ')
    const point = mount?.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (point === dir && rest?.startsWith('ramfs ')) return true
  }
  return false
}

/**
 * A store of templates under `dir` (a ramfs is mounted there on first use).
 * @throws (from `get`) WARREN_ERR_BACKEND_UNAVAILABLE when the ramfs cannot be mounted
 */
export function createTemplateStore (dir: string, max: number): TemplateStore {
  const kept = new Map<string, Promise<VmTemplate>>()
  /** Keys whose template is being made: never dropped from under their build. */
  const building = new Set<string>()
  let mounted: Promise<void> | undefined
  let closed = false

  const mount = (): Promise<void> => {
    mounted ??= (async () => {
      await mkdir(dir, { recursive: true, mode: 0o700 })
      if (!isRamfs(dir)) await run('mount', ['-t', 'ramfs', '-o', 'mode=0700', 'ramfs', dir])
      // What a previous process left here is not known to this store.
      for (const name of await readdir(dir)) if (!kept.has(name)) await rm(join(dir, name), { recursive: true, force: true })
    })()
    mounted.catch(() => { mounted = undefined })
    return mounted
  }

  const drop = async (key: string): Promise<void> => {
    kept.delete(key)
    await rm(join(dir, key), { recursive: true, force: true }).catch(() => {})
  }

  return {
    async get (key, build) {
      const known = kept.get(key)
      if (known !== undefined) {
        // Most recently used last: Map keeps insertion order.
        kept.delete(key)
        kept.set(key, known)
        return await known
      }
      const work = (async (): Promise<VmTemplate> => {
        await mount()
        const home = join(dir, key)
        await rm(home, { recursive: true, force: true })
        await mkdir(home, { mode: 0o700 })
        const t: VmTemplate = { key, memoryFile: join(home, 'ram'), stateFile: join(home, 'state') }
        await build({ memoryFile: t.memoryFile, stateFile: t.stateFile })
        await stat(t.stateFile)
        return t
      })()
      kept.set(key, work)
      building.add(key)
      // A failed build is not remembered: the next create tries again.
      work.then(() => building.delete(key), () => { building.delete(key); if (kept.get(key) === work) void drop(key) })
      // Past the bound, the least recently used that is made goes (one being made waits its turn).
      for (const oldest of [...kept.keys()]) {
        if (kept.size <= max) break
        if (oldest !== key && !building.has(oldest)) await drop(oldest)
      }
      const t = await work
      if (closed) { await drop(key); throw new Error('the template store closed') }
      return t
    },

    get size () { return kept.size },

    async clear () {
      await Promise.allSettled([...kept.values()])
      for (const key of [...kept.keys()]) await drop(key)
      mounted = undefined
      if (isRamfs(dir)) {
        for (const name of await readdir(dir).catch(() => [] as string[])) await rm(join(dir, name), { recursive: true, force: true }).catch(() => {})
        // Lazily: VMs still mapping a file keep it until they end.
        await run('umount', ['-l', dir]).catch(() => {})
      }
      await rmdir(dir).catch(() => {})
    },

    async close () {
      closed = true
      await this.clear()
    }
  }
}
