/**
 * Saved VMs to start new ones from ("templates"): per shape (layer stack, vCPUs, memory, disk,
 * processes, guest image), a VM is booted once with its RAM a memfd of the node's (guest-ram.ts),
 * its machine state saved beside it (vm-state.ts), and it is ended; the RAM is then sealed, and
 * every later VM of that shape is QEMU started with `-incoming` from the state and that RAM mapped
 * private. Restored VMs share the pages they have not written: their memory is mostly the
 * template's, counted once.
 *
 * Sealed, and not a file on a file system: QEMU opens the RAM read-write even when it maps it
 * private, and QEMU 7.2 answers a guest's free page reports by punching holes into it
 * (physmem's ram_block_discard_range), which would cut pages out from under every other VM
 * restored from it. The seal refuses both. (A restored VM so keeps the pages it freed; a booted
 * one gives them back.)
 *
 * Bounded: at most `max` templates holding at most `maxMiB` of RAM together, the least recently
 * used removed past either (VMs restored from it keep their mapping: its pages live until its
 * last VM ends). A shape larger than `maxMiB` alone is not saved: its VMs boot.
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { run } from '../../images/index.js'
import { parseMountinfo } from '../container/cgroups/index.js'
import { createGuestRam, type GuestRam } from './guest-ram.js'

/** One saved VM: its RAM and its machine state. */
export interface VmTemplate {
  readonly key: string
  /** The guest's RAM, sealed. */
  readonly ram: GuestRam
  /** The machine state without the RAM (QEMU's migration stream). */
  readonly stateFile: string
}

/** Makes a template: boots a VM whose RAM is `ram` (shared: written through) and saves its state to `stateFile`, then ends it. */
export type TemplateBuilder = (parts: { ram: GuestRam, stateFile: string }) => Promise<void>

export interface TemplateStore {
  /**
   * The template for `key` with `memoryMiB` of RAM, made by `build` the first time (once, however
   * many ask at once); undefined for RAM past the store's bound, which no template holds.
   */
  get (key: string, memoryMiB: number, build: TemplateBuilder): Promise<VmTemplate | undefined>
  /** Templates made and kept. */
  readonly size: number
  /**
   * Removes every template, this store's and any a previous process left in its directory (VMs
   * restored from them keep their pages until they end).
   */
  clear (): Promise<void>
  /** `clear`, and later `get`s fail. */
  close (): Promise<void>
}

/** A short stable name for a template's shape. */
export function templateKey (shape: unknown): string {
  return createHash('sha256').update(JSON.stringify(shape)).digest('hex').slice(0, 24)
}

/** True when a ramfs is mounted at `dir`: where templates were kept before their RAM was sealed. */
function isRamfs (dir: string): boolean {
  const text = existsSync('/proc/self/mountinfo') ? readFileSync('/proc/self/mountinfo', 'utf8') : ''
  return parseMountinfo(text).some((m) => m.mountPoint === dir && m.fsType === 'ramfs')
}

/**
 * A store of templates: their RAM held by the node, their states under `dir`.
 * @throws (from `get`) what the build throws; WARREN_ERR_BACKEND_UNAVAILABLE when the RAM cannot be made or sealed
 */
export function createTemplateStore (dir: string, max: number, maxMiB = Infinity): TemplateStore {
  const kept = new Map<string, Promise<VmTemplate>>()
  /** The RAM of each kept template, in MiB. */
  const sizes = new Map<string, number>()
  const held = (): number => [...sizes.values()].reduce((a, b) => a + b, 0)
  /** Keys whose template is being made: never dropped from under their build. */
  const building = new Set<string>()
  let ready: Promise<void> | undefined
  let closed = false

  const prepare = (): Promise<void> => {
    ready ??= (async () => {
      await forgetRamfs(dir)
      await mkdir(dir, { recursive: true, mode: 0o700 })
      // What a previous process left here is not known to this store.
      for (const name of await readdir(dir)) if (!kept.has(name)) await rm(join(dir, name), { recursive: true, force: true })
    })()
    ready.catch(() => { ready = undefined })
    return ready
  }

  const drop = async (key: string): Promise<void> => {
    const t = kept.get(key)
    kept.delete(key)
    sizes.delete(key)
    await t?.then(async (made) => await made.ram.close(), () => {})
    await rm(join(dir, key), { recursive: true, force: true }).catch(() => {})
  }

  return {
    async get (key, memoryMiB, build) {
      const known = kept.get(key)
      if (known !== undefined) {
        // Most recently used last: Map keeps insertion order.
        kept.delete(key)
        kept.set(key, known)
        return await known
      }
      if (memoryMiB > maxMiB) return undefined
      const work = (async (): Promise<VmTemplate> => {
        await prepare()
        const home = join(dir, key)
        await rm(home, { recursive: true, force: true })
        await mkdir(home, { mode: 0o700 })
        const ram = await createGuestRam(memoryMiB * 1024 * 1024)
        try {
          const stateFile = join(home, 'state')
          await build({ ram, stateFile })
          await stat(stateFile)
          // The VM that wrote it has ended (else this fails): from here nothing can change it.
          await ram.seal()
          return { key, ram, stateFile }
        } catch (err) {
          await ram.close()
          throw err
        }
      })()
      kept.set(key, work)
      sizes.set(key, memoryMiB)
      building.add(key)
      // A failed build is not remembered: the next create tries again.
      work.then(() => building.delete(key), () => { building.delete(key); if (kept.get(key) === work) void drop(key) })
      // Past the bound, the least recently used that is made goes (one being made waits its turn).
      for (const oldest of [...kept.keys()]) {
        if (kept.size <= max && held() <= maxMiB) break
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
      ready = undefined
      await forgetRamfs(dir)
      await rm(dir, { recursive: true, force: true }).catch(() => {})
    },

    async close () {
      closed = true
      await this.clear()
    }
  }
}

/** Unmounts the ramfs a node from before sealed RAM kept its templates on (lazily: VMs mapping a file keep it). */
async function forgetRamfs (dir: string): Promise<void> {
  if (!isRamfs(dir)) return
  for (const name of await readdir(dir).catch(() => [] as string[])) await rm(join(dir, name), { recursive: true, force: true }).catch(() => {})
  await run('umount', ['-l', dir]).catch(() => {})
}
