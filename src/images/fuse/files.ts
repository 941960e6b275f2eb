/**
 * The caller's list of layer files, in whichever of its three shapes, seen as one lookup that
 * only ever yields valid entries. An invalid entry (a name the kernel could not carry, a size
 * that is not a byte count) is reported once and is otherwise simply not there.
 */
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import { NAME_MAX } from './protocol.js'
import type { LayerFileInfo, LayerFileLookup, LayerFiles, LayerFsErrorContext } from './types.js'

export class FileList {
  private readonly source: LayerFileLookup
  private readonly reported = new Set<string>()

  constructor (files: LayerFiles, private readonly report: (err: WarrenError, context: LayerFsErrorContext) => void) {
    this.source = toLookup(files)
  }

  /** The current entry called `name`, if there is a valid one. */
  find (name: string): LayerFileInfo | undefined {
    const info = this.source.get(name)
    return info !== undefined && this.valid(info) ? info : undefined
  }

  /** The current valid entries, each name once. */
  * list (): Generator<LayerFileInfo> {
    const seen = new Set<string>()
    for (const info of this.source.list()) {
      if (!this.valid(info) || seen.has(info.name)) continue
      seen.add(info.name)
      yield info
    }
  }

  private valid (info: LayerFileInfo): boolean {
    const problem = nameProblem(info.name) ?? (!Number.isSafeInteger(info.size) || info.size < 0 ? 'a bad size' : undefined)
    if (problem === undefined) return true
    const key = `${String(info.name)}\0${String(info.size)}`
    if (!this.reported.has(key)) {
      this.reported.add(key)
      const name = String(info.name)
      this.report(createError(ErrorCodes.INVALID_ARGUMENT, `layer file entry ${JSON.stringify(name)} has ${problem}; it is not shown`, { name, size: String(info.size) }), { op: 'LOOKUP', name })
    }
    return false
  }
}

/** Why `name` cannot be a file name in the mount's directory, if it cannot. */
function nameProblem (name: unknown): string | undefined {
  if (typeof name !== 'string' || name === '' || name === '.' || name === '..') return 'a bad name'
  if (name.includes('/') || name.includes('\0')) return 'a bad name'
  if (Buffer.byteLength(name) > NAME_MAX) return 'a name longer than 255 bytes'
  return undefined
}

function isLookup (files: LayerFiles): files is LayerFileLookup {
  return typeof files === 'object' && files !== null && !Array.isArray(files) && typeof (files as LayerFileLookup).get === 'function'
}

/** One shape for the three ways of giving the files. */
function toLookup (files: LayerFiles): LayerFileLookup {
  if (typeof files === 'function') {
    return {
      get (name) {
        for (const f of files()) if (f.name === name) return f
        return undefined
      },
      list: files
    }
  }
  if (isLookup(files)) return files
  const fixed = files as readonly LayerFileInfo[]
  const byName = new Map(fixed.map((f) => [f.name, f]))
  return { get: (name) => byName.get(name), list: () => fixed }
}
