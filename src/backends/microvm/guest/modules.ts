/**
 * Which kernel module files a guest needs, from the kernel's own index: `modules.dep` (each
 * module's file and the files of what it depends on) and `modules.builtin` (modules compiled
 * into the kernel, which need no file). A module is named as the kernel names it: file name
 * without `.ko`, dashes as underscores.
 */
import { readFile } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { createError, ErrorCodes } from '../../../errors.js'

/** The module index of one kernel's module tree (`lib/modules/<release>`). */
export interface ModuleIndex {
  /** Module name → its file, relative to the tree. */
  files: Map<string, string>
  /** Module name → names it depends on. */
  deps: Map<string, string[]>
  /** Names compiled into the kernel. */
  builtin: Set<string>
}

/** The kernel's name of a module file (`kernel/fs/erofs/erofs.ko` → `erofs`). */
export function moduleName (file: string): string {
  return basename(file).replace(/\.ko(\.(xz|gz|zst))?$/, '').replace(/-/g, '_')
}

/** Parses `modules.dep` and `modules.builtin` text. */
export function parseModuleIndex (dep: string, builtin: string): ModuleIndex {
  const files = new Map<string, string>()
  const deps = new Map<string, string[]>()
  for (const line of dep.split('\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const file = line.slice(0, colon).trim()
    const name = moduleName(file)
    files.set(name, file)
    deps.set(name, line.slice(colon + 1).trim().split(/\s+/).filter((f) => f !== '').map(moduleName))
  }
  const built = new Set(builtin.split('\n').map((l) => l.trim()).filter((l) => l !== '').map(moduleName))
  return { files, deps, builtin: built }
}

/** Reads the index of the module tree at `dir`. */
export async function readModuleIndex (dir: string): Promise<ModuleIndex> {
  const dep = await readFile(join(dir, 'modules.dep'), 'utf8')
  const builtin = await readFile(join(dir, 'modules.builtin'), 'utf8').catch(() => '')
  return parseModuleIndex(dep, builtin)
}

/**
 * The modules to load for `wanted`, dependencies before their users, each once; built-in ones
 * are left out (they need no loading).
 * @throws WARREN_ERR_UNSUPPORTED naming a module the kernel has neither built in nor as a file
 */
export function loadOrder (index: ModuleIndex, wanted: readonly string[]): Array<{ name: string, file: string }> {
  const out: Array<{ name: string, file: string }> = []
  const done = new Set<string>()
  const visit = (name: string, path: string[]): void => {
    if (done.has(name) || index.builtin.has(name)) return
    const file = index.files.get(name)
    if (file === undefined) {
      throw createError(ErrorCodes.UNSUPPORTED, `the guest kernel has no module ${name} (needed by ${path.join(' → ') || 'the guest'})`, { module: name })
    }
    // A cycle cannot load at all; modules.dep never has one, but a bad file must not hang us.
    if (path.includes(name)) throw createError(ErrorCodes.UNSUPPORTED, `module dependency cycle: ${[...path, name].join(' → ')}`, { module: name })
    for (const d of index.deps.get(name) ?? []) visit(d, [...path, name])
    done.add(name)
    out.push({ name, file })
  }
  for (const name of wanted) visit(name.replace(/-/g, '_'), [])
  return out
}
