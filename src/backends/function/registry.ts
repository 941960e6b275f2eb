/**
 * Which functions exist. A function is a module `NAME.mjs` or `NAME.js` in the functions
 * directory; the directory is looked at on every call, so dropping a file in registers it and
 * editing one takes effect on the next call. `js` is built in and cannot be shadowed.
 */
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createError, ErrorCodes } from '../../errors.js'

/** The name of the built-in sandboxed JavaScript evaluator. */
export const JS_FUNCTION = 'js'

/** Extensions a function module may have, in order of preference when both exist. */
const EXTENSIONS = ['.mjs', '.js'] as const

/** Names are file names without extension; this keeps them from naming a path. */
const NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

/** Where a name leads. */
export type ResolvedFunction =
  | { kind: 'js' }
  | { kind: 'module', name: string, url: string }

/** Looks functions up by name. */
export interface FunctionRegistry {
  /**
   * Finds `name`. Rejects with WARREN_ERR_INVALID_ARGUMENT for a name that cannot be a
   * function name, and WARREN_ERR_NOT_FOUND when no such function exists.
   */
  resolve (name: string): Promise<ResolvedFunction>
  /** Every name that resolves now, sorted, `js` included. */
  list (): Promise<string[]>
}

/** Makes a registry over `dir` (null: only the built-in `js`). */
export function createFunctionRegistry (dir: string | null): FunctionRegistry {
  return {
    async resolve (name) {
      if (typeof name !== 'string' || !NAME_PATTERN.test(name) || name.endsWith('.')) {
        throw createError(ErrorCodes.INVALID_ARGUMENT, `not a function name: ${JSON.stringify(name)}`, { name: String(name) })
      }
      if (name === JS_FUNCTION) return { kind: 'js' }
      if (dir !== null) {
        for (const ext of EXTENSIONS) {
          const path = join(dir, name + ext)
          const info = await stat(path).catch(() => undefined)
          if (info?.isFile() === true) {
            // Time and size in the URL make an edited file a new module to import().
            return { kind: 'module', name, url: `${pathToFileURL(path).href}?v=${info.mtimeMs}-${info.size}` }
          }
        }
      }
      throw createError(ErrorCodes.NOT_FOUND, `no function named ${JSON.stringify(name)}`, { name })
    },

    async list () {
      const names = new Set<string>([JS_FUNCTION])
      if (dir !== null) {
        const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
        for (const entry of entries) {
          const ext = EXTENSIONS.find((e) => entry.name.endsWith(e))
          const name = ext === undefined ? '' : entry.name.slice(0, -ext.length)
          if ((entry.isFile() || entry.isSymbolicLink()) && NAME_PATTERN.test(name) && !name.endsWith('.')) names.add(name)
        }
      }
      return [...names].sort()
    }
  }
}
