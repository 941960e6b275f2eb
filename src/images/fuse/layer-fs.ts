/**
 * The file system itself: one read-only directory (the root) whose entries are layer image files,
 * their bytes coming from the caller's async `read`. Everything here answers from memory except
 * READ, which waits on the callback under a deadline.
 *
 * Inodes: a name with a given size always gets the same inode number, so the kernel's cached
 * pages for it stay valid across lookups (a layer's bytes never change). The kernel holds
 * references by lookup count; an inode's record is dropped when the kernel has forgotten it and no
 * handle is open, and comes back with the same number on the next lookup.
 */
import type { WarrenError } from '../../errors.js'
import { readWithDeadline, type ReadCounters } from './deadline-read.js'
import type { FuseTunables } from './defaults.js'
import { FileList } from './files.js'
import { DT_DIR, DT_REG, Errno, FUSE_ROOT_ID, GETATTR_FH, NAME_MAX, O_ACCMODE, O_RDONLY, Op, OpenFlag, S_IFDIR, S_IFREG, W_OK } from './protocol.js'
import type { FileSystemOps, FuseRequest, Handler, Reply } from './session.js'
import {
  attrOut, direntSize, entryOut, getxattrOut, openOut, parseAccessIn, parseGetattrIn, parseGetxattrIn, parseName,
  parseOpenIn, parseReadIn, parseReleaseIn, statfsOut, validity, writeDirent, type Attr, type Validity
} from './structs.js'
import type { LayerFileInfo, LayerFiles, LayerFsErrorContext, LayerRead } from './types.js'

/** What the file system needs from its owner. */
export interface LayerFsConfig {
  files: LayerFiles
  read: LayerRead
  tunables: Pick<FuseTunables, 'readTimeoutMs' | 'entryTimeoutS' | 'attrTimeoutS' | 'rootAttrTimeoutS' | 'fileMode' | 'blksize'>
  report: (err: WarrenError, context: LayerFsErrorContext) => void
}

interface Inode {
  ino: number
  name: string
  size: number
  /** Full st_mode, type bits included. */
  mode: number
  mtimeMs: number
  /** References the kernel holds (lookups not yet forgotten). */
  nlookup: number
  /** Open file handles. */
  open: number
}

interface DirEntry {
  name: Buffer
  ino: number
  type: number
}

/** Statfs block size: only a unit for the totals. */
const STATFS_BSIZE = 4096

export class LayerFileSystem implements FileSystemOps {
  readonly handlers: ReadonlyMap<number, Handler>
  readonly counters: ReadCounters = { reads: 0, bytesRead: 0, readErrors: 0, readTimeouts: 0 }
  private readonly source: FileList
  /** `name\0size` → inode number, forever: the same file always gets the same number. */
  private readonly numbers = new Map<string, number>()
  private nextIno = FUSE_ROOT_ID + 1
  private readonly inodes = new Map<number, Inode>()
  private readonly files = new Map<number, Inode>()
  private readonly dirs = new Map<number, DirEntry[]>()
  private nextFh = 1
  private readonly entryValid: Validity
  private readonly attrValid: Validity
  private readonly rootValid: Validity
  private readonly uid = process.getuid?.() ?? 0
  private readonly gid = process.getgid?.() ?? 0

  constructor (private readonly config: LayerFsConfig) {
    this.source = new FileList(config.files, config.report)
    const t = config.tunables
    this.entryValid = validity(t.entryTimeoutS)
    this.attrValid = validity(t.attrTimeoutS)
    this.rootValid = validity(t.rootAttrTimeoutS)
    this.handlers = new Map<number, Handler>([
      [Op.LOOKUP, (r) => this.lookup(r)],
      [Op.GETATTR, (r) => this.getattr(r)],
      [Op.OPEN, (r) => this.open(r)],
      [Op.READ, (r) => this.read(r)],
      [Op.RELEASE, (r) => this.release(r)],
      [Op.FLUSH, () => 0],
      [Op.OPENDIR, (r) => this.opendir(r)],
      [Op.READDIR, (r) => this.readdir(r)],
      [Op.RELEASEDIR, (r) => this.releasedir(r)],
      [Op.STATFS, () => this.statfs()],
      [Op.GETXATTR, () => Errno.ENODATA], // layer files carry no extended attributes
      [Op.LISTXATTR, (r) => this.listxattr(r)],
      [Op.ACCESS, (r) => this.access(r)]
    ])
  }

  forget (nodeid: number, nlookup: number): void {
    const inode = this.inodes.get(nodeid)
    if (inode === undefined) return
    inode.nlookup = Math.max(0, inode.nlookup - nlookup)
    this.collect(inode)
  }

  private lookup (r: FuseRequest): Reply {
    if (r.header.nodeid !== FUSE_ROOT_ID) return Errno.ENOTDIR
    const name = parseName(r.body)
    if (name === undefined) return Errno.EINVAL
    if (Buffer.byteLength(name) > NAME_MAX) return Errno.ENAMETOOLONG
    const info = this.source.find(name)
    if (info === undefined) return Errno.ENOENT // not cached by the kernel: a layer added later is found
    const inode = this.inodeFor(info)
    inode.nlookup++
    return [entryOut(inode.ino, 0, this.entryValid, this.attrValid, this.attrOf(inode))]
  }

  private getattr (r: FuseRequest): Reply {
    if (r.header.nodeid === FUSE_ROOT_ID) return [attrOut(this.rootValid, this.rootAttr())]
    const arg = parseGetattrIn(r.body)
    const inode = (arg !== undefined && (arg.flags & GETATTR_FH) !== 0 ? this.files.get(arg.fh) : undefined) ?? this.inodes.get(r.header.nodeid)
    return inode === undefined ? Errno.ENOENT : [attrOut(this.attrValid, this.attrOf(inode))]
  }

  private open (r: FuseRequest): Reply {
    if (r.header.nodeid === FUSE_ROOT_ID) return Errno.EISDIR
    const inode = this.inodes.get(r.header.nodeid)
    if (inode === undefined) return Errno.ENOENT
    const arg = parseOpenIn(r.body)
    if (arg === undefined) return Errno.EINVAL
    if ((arg.flags & O_ACCMODE) !== O_RDONLY) return Errno.EROFS
    const fh = this.nextFh++
    this.files.set(fh, inode)
    inode.open++
    // KEEP_CACHE: the bytes never change, so pages read by one open serve every later one.
    return [openOut(fh, OpenFlag.KEEP_CACHE | OpenFlag.NOFLUSH)]
  }

  private release (r: FuseRequest): Reply {
    const arg = parseReleaseIn(r.body)
    const inode = arg === undefined ? undefined : this.files.get(arg.fh)
    if (arg !== undefined && inode !== undefined) {
      this.files.delete(arg.fh)
      inode.open--
      this.collect(inode)
    }
    return 0
  }

  private read (r: FuseRequest): Reply | Promise<Reply> {
    const arg = parseReadIn(r.body)
    if (arg === undefined) return Errno.EINVAL
    const inode = this.files.get(arg.fh) ?? this.inodes.get(r.header.nodeid)
    if (inode === undefined) return Errno.EBADF
    if (arg.offset >= inode.size || arg.size === 0) return [] // end of file: an empty answer
    const length = Math.min(arg.size, inode.size - arg.offset)
    const { read, report } = this.config
    return readWithDeadline({ read, report, timeoutMs: this.config.tunables.readTimeoutMs, counters: this.counters }, inode.name, arg.offset, length, r.signal)
  }

  private opendir (r: FuseRequest): Reply {
    if (r.header.nodeid !== FUSE_ROOT_ID) return Errno.ENOTDIR
    // A snapshot per open directory, so READDIR offsets stay valid while layers come and go.
    const entries: DirEntry[] = [
      { name: Buffer.from('.'), ino: FUSE_ROOT_ID, type: DT_DIR },
      { name: Buffer.from('..'), ino: FUSE_ROOT_ID, type: DT_DIR }
    ]
    for (const info of this.source.list()) entries.push({ name: Buffer.from(info.name), ino: this.numberFor(info), type: DT_REG })
    const fh = this.nextFh++
    this.dirs.set(fh, entries)
    return [openOut(fh, 0)]
  }

  private readdir (r: FuseRequest): Reply {
    const arg = parseReadIn(r.body)
    if (arg === undefined) return Errno.EINVAL
    const entries = this.dirs.get(arg.fh)
    if (entries === undefined) return Errno.EBADF
    // The offset is the index of the next entry: each entry's `off` says where to resume after it.
    // The reply is sized by the entries that fit, never by `size` itself (up to 4 GiB).
    let end = arg.offset
    let bytes = 0
    while (end < entries.length && bytes + direntSize(entries[end]!.name.length) <= arg.size) bytes += direntSize(entries[end++]!.name.length)
    const out = Buffer.alloc(bytes)
    let used = 0
    for (let i = arg.offset; i < end; i++) {
      const e = entries[i]!
      used += writeDirent(out, used, e.ino, i + 1, e.type, e.name)
    }
    return [out]
  }

  private releasedir (r: FuseRequest): Reply {
    const arg = parseReleaseIn(r.body)
    if (arg !== undefined) this.dirs.delete(arg.fh)
    return 0
  }

  private statfs (): Reply {
    let blocks = 0
    let files = 0
    for (const info of this.source.list()) {
      blocks += Math.ceil(info.size / STATFS_BSIZE)
      files++
    }
    return [statfsOut({ blocks, files: files + 1, bsize: STATFS_BSIZE, namelen: NAME_MAX })]
  }

  private listxattr (r: FuseRequest): Reply {
    const arg = parseGetxattrIn(r.body)
    if (arg === undefined) return Errno.EINVAL
    // Size 0 asks how big the list is; otherwise the (empty) list itself.
    return arg.size === 0 ? [getxattrOut(0)] : []
  }

  private access (r: FuseRequest): Reply {
    const arg = parseAccessIn(r.body)
    if (arg === undefined) return Errno.EINVAL
    if (r.header.nodeid !== FUSE_ROOT_ID && !this.inodes.has(r.header.nodeid)) return Errno.ENOENT
    return (arg.mask & W_OK) !== 0 ? Errno.EROFS : 0
  }

  private numberFor (info: LayerFileInfo): number {
    const key = `${info.name}\0${info.size}`
    let ino = this.numbers.get(key)
    if (ino === undefined) {
      ino = this.nextIno++
      this.numbers.set(key, ino)
    }
    return ino
  }

  private inodeFor (info: LayerFileInfo): Inode {
    const ino = this.numberFor(info)
    let inode = this.inodes.get(ino)
    if (inode === undefined) {
      inode = { ino, name: info.name, size: info.size, mode: S_IFREG | this.permissions(info), mtimeMs: info.mtimeMs ?? 0, nlookup: 0, open: 0 }
      this.inodes.set(ino, inode)
    }
    return inode
  }

  /** Permission bits without write bits: nothing on this mount can be written. */
  private permissions (info: LayerFileInfo): number {
    return (info.mode ?? this.config.tunables.fileMode) & 0o7555
  }

  private collect (inode: Inode): void {
    if (inode.nlookup === 0 && inode.open === 0) this.inodes.delete(inode.ino)
  }

  private attrOf (inode: Inode): Attr {
    return { ino: inode.ino, size: inode.size, mode: inode.mode, nlink: 1, uid: this.uid, gid: this.gid, mtimeMs: inode.mtimeMs, blksize: this.config.tunables.blksize }
  }

  private rootAttr (): Attr {
    return { ino: FUSE_ROOT_ID, size: 0, mode: S_IFDIR | 0o555, nlink: 2, uid: this.uid, gid: this.gid, mtimeMs: 0, blksize: this.config.tunables.blksize }
  }
}
