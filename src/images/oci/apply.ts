/**
 * Applies one layer tar onto an image's root, in-process, in one pass: files, directories,
 * symlinks and hard links are made inside the root (parents resolved as in resolve.ts), and the
 * whiteouts of the OCI spec act on the layers below: `.wh.NAME` deletes NAME, `.wh..wh..opq`
 * empties its directory. Both act on lower layers only, so what this layer itself wrote (before
 * or after the marker in the tar) is remembered and kept.
 *
 * Never made: device nodes and fifos. Every layer is mounted nodev and every sandbox gets its
 * own /dev, so in an image they do nothing, and on the host (where the build tree lives, since
 * mkfs.erofs 1.5 reads a directory) they would be real devices. They are left out, with a note.
 * Setuid and setgid bits are kept: sudo and ping need them, and the tree they pass through is
 * private to this process (0700) and removed once the EROFS image is built.
 * Owners and timestamps are not applied: mkfs.erofs makes every file root's, at one fixed time.
 */
import { createHash } from 'node:crypto'
import { constants, linkSync, readdirSync, rmSync, symlinkSync, unlinkSync, chmodSync } from 'node:fs'
import { open } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import type { Header } from 'tar-stream'
import { archiveError, type ArchiveLimits } from './defaults.js'
import { fsPath, memberComponents, memberPaths, shown, type BytePath } from './paths.js'
import { lstatIn, makeDir, resolveDir, under } from './resolve.js'
import { forEachMember, type MemberBody } from './stream.js'

const WHITEOUT = '.wh.'
const OPAQUE = '.wh..wh..opq'

/** What applying layers shares: the root, the bounds, the bytes written so far. */
export interface ApplyContext {
  root: BytePath
  field: string
  limits: ArchiveLimits
  /** Bytes of file content written into the tree, across layers. */
  written: number
  onNote?: (line: string) => void
}

/** Removes whatever is at `path` (never following it), so a member can take its place. */
function clear (path: BytePath): void {
  const st = lstatIn(path)
  if (st === undefined) return
  if (st.isDirectory()) rmSync(fsPath(path), { recursive: true, force: true })
  else unlinkSync(fsPath(path))
}

/** Writes a file member's body to a new file at `path` with `mode`, counting its bytes. */
async function writeFile (ctx: ApplyContext, path: BytePath, mode: number, body: MemberBody): Promise<void> {
  clear(path)
  // O_EXCL | O_NOFOLLOW: a new regular file, made here, whatever raced (nothing should).
  const fh = await open(fsPath(path), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
  try {
    for await (const chunk of body) {
      ctx.written += chunk.length
      if (ctx.written > ctx.limits.maxTreeBytes) throw archiveError(ctx.field, `the image unpacks to more than ${ctx.limits.maxTreeBytes} bytes`)
      await fh.write(chunk)
    }
    await fh.chmod(mode)
  } finally {
    await fh.close()
  }
}

/**
 * Applies the layer tar on `input` (already decompressed) onto `ctx.root`.
 * @param label the layer, for messages ("layer 2 of 5")
 * @param diffId when given, the sha256 the uncompressed tar must have; a mismatch is refused
 *   (the tree is then discarded by the caller)
 */
export async function applyLayer (ctx: ApplyContext, input: Readable, label: string, diffId?: string): Promise<void> {
  const { root, field, limits } = ctx
  /** Paths under the root this layer made or entered: whiteouts spare them. */
  const mine = new Set<string>()
  let pathBytes = 0
  const dropped = { 'device node': 0, fifo: 0 }
  const hash = createHash('sha256')
  if (diffId !== undefined) input.on('data', (b: Buffer) => hash.update(b))

  /** Deletes what lower layers put at `parts`, keeping what this layer wrote there. */
  const removeLower = (parts: string[]): void => {
    const path = under(root, parts)
    const st = lstatIn(path)
    if (st === undefined) return
    if (!mine.has(parts.join('/'))) { rmSync(fsPath(path), { recursive: true, force: true }); return }
    if (st.isDirectory()) for (const child of readdirSync(fsPath(path), { encoding: 'buffer' })) removeLower([...parts, child.toString('latin1')])
  }

  const onMember = async (header: Header, body: MemberBody): Promise<void> => {
    const { name, linkname } = memberPaths(header)
    pathBytes += name.length + linkname.length
    if (pathBytes > limits.maxLayerPathBytes) throw archiveError(field, `${label} names more than ${limits.maxLayerPathBytes} bytes of paths`)
    const parts = memberComponents(name, field, limits)
    const mode = header.mode & 0o7777
    if (parts.length === 0) {
      if (header.type === 'directory') chmodSync(fsPath(root), mode) // the image's / itself
      return
    }
    const base = parts[parts.length - 1]!
    if (base.startsWith(WHITEOUT)) {
      const dir = resolveDir(root, parts.slice(0, -1), field, limits)
      if (dir === undefined) return // nothing below to hide
      if (base === OPAQUE) {
        mine.add(dir.join('/'))
        for (const child of readdirSync(fsPath(under(root, dir)), { encoding: 'buffer' })) removeLower([...dir, child.toString('latin1')])
      } else if (!base.startsWith(`${WHITEOUT}${WHITEOUT}`)) { // .wh..wh.* are aufs' own files, not whiteouts
        const hidden = base.slice(WHITEOUT.length)
        if (hidden !== '' && hidden !== '.' && hidden !== '..') removeLower([...dir, hidden])
      }
      return
    }
    const dir = resolveDir(root, parts.slice(0, -1), field, limits, (made) => mine.add(made))!
    const path = under(root, [...dir, base])
    const key = [...dir, base].join('/')
    switch (header.type) {
      case 'directory': {
        if (lstatIn(path)?.isDirectory() !== true) { clear(path); makeDir(path, mode) } else chmodSync(fsPath(path), mode)
        break
      }
      case 'file':
      case 'contiguous-file':
        await writeFile(ctx, path, mode, body)
        break
      case 'symlink':
        if (linkname.length > limits.maxPathBytes) throw archiveError(field, `symlink ${shown(name)} has a target longer than ${limits.maxPathBytes} bytes`)
        clear(path)
        symlinkSync(fsPath(linkname), fsPath(path))
        break
      case 'link': {
        // A hard link names a member of the image: resolved inside the root like any path, never followed at its end.
        const climbs = linkname.split('/').includes('..')
        const tparts = climbs ? [] : memberComponents(linkname, field, limits)
        const tdir = tparts.length > 0 ? resolveDir(root, tparts.slice(0, -1), field, limits) : undefined
        const target = tdir !== undefined ? under(root, [...tdir, tparts[tparts.length - 1]!]) : undefined
        const st = target !== undefined ? lstatIn(target) : undefined
        if (target === undefined || st === undefined || st.isDirectory()) {
          throw archiveError(field, `${label}: hard link ${shown(name)} names ${shown(linkname)}, which is not a file of the image`, { member: shown(name) })
        }
        if (target === path) break
        clear(path)
        linkSync(fsPath(target), fsPath(path))
        break
      }
      case 'character-device':
      case 'block-device':
      case 'fifo':
        clear(path) // the layer replaced what was below, with something that is not made
        dropped[header.type === 'fifo' ? 'fifo' : 'device node']++
        return
      default:
        throw archiveError(field, `${label}: member ${shown(name)} is of a type that is not unpacked (${String(header.type)})`, { member: shown(name) })
    }
    mine.add(key)
  }

  await forEachMember(input, field, label, limits, onMember)
  if (diffId !== undefined) {
    const actual = `sha256:${hash.digest('hex')}`
    if (actual !== diffId) throw archiveError(field, `${label} does not match its digest: the config says its tar is ${diffId}, it is ${actual}`, { expected: diffId, actual })
  }
  const notes = Object.entries(dropped).filter(([, n]) => n > 0).map(([kind, n]) => `${n} ${kind}${n === 1 ? '' : 's'}`)
  if (notes.length > 0) ctx.onNote?.(`${label}: left out ${notes.join(' and ')} (a sandbox has its own /dev, and layers are mounted nodev)`)
}
