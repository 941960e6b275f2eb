/**
 * Paths inside an image's root, resolved as the kernel's openat2(RESOLVE_IN_ROOT) would: one
 * component at a time with lstat, a symlink's target read and walked with the root as `/`, and
 * `..` stopping at the root. A lower layer's `etc -> /etc` therefore leads to the image's /etc,
 * never the host's, and no path the archive names is ever handed to the kernel to follow.
 *
 * The tree is private while it is built (a 0700 directory only this process writes), so what
 * lstat saw is still there when the file is made.
 */
import { chmodSync, lstatSync, mkdirSync, readlinkSync, rmSync, type Stats } from 'node:fs'
import { archiveError, type ArchiveLimits } from './defaults.js'
import { fsPath, type BytePath } from './paths.js'

/** `root/a/b/…` as a byte path. */
export const under = (root: BytePath, parts: string[]): BytePath => parts.length === 0 ? root : `${root}/${parts.join('/')}`

/** lstat, or undefined where nothing is. */
export function lstatIn (path: BytePath): Stats | undefined {
  try {
    return lstatSync(fsPath(path))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined
    throw err
  }
}

/** Makes a directory with exactly `mode`, whatever the umask. */
export function makeDir (path: BytePath, mode = 0o755): void {
  mkdirSync(fsPath(path), { mode })
  chmodSync(fsPath(path), mode)
}

/**
 * The real directory that `parts` name inside `root`, as components under it (each a directory,
 * none a symlink).
 * @param create when given, missing directories are made (and anything not a directory in the
 *   way replaced), each reported to `create` by its path under the root; when not, a path that
 *   does not lead to a directory gives undefined
 */
export function resolveDir (root: BytePath, parts: string[], field: string, limits: ArchiveLimits, create?: (made: BytePath) => void): string[] | undefined {
  const real: string[] = []
  const todo = [...parts]
  let hops = 0
  while (todo.length > 0) {
    const c = todo.shift()!
    if (c === '' || c === '.') continue
    if (c === '..') { real.pop(); continue }
    const path = under(root, [...real, c])
    const st = lstatIn(path)
    if (st?.isSymbolicLink() === true) {
      if (++hops > limits.maxSymlinkHops) throw archiveError(field, `more than ${limits.maxSymlinkHops} symlinks on the way to ${parts.join('/')}`)
      const target = readlinkSync(fsPath(path), { encoding: 'buffer' }).toString('latin1')
      if (target.startsWith('/')) real.length = 0
      todo.unshift(...target.split('/'))
      continue
    }
    if (st?.isDirectory() === true) { real.push(c); continue }
    if (create === undefined) return undefined
    if (st !== undefined) rmSync(fsPath(path), { recursive: true, force: true })
    makeDir(path)
    real.push(c)
    create(real.join('/'))
  }
  return real
}
