/**
 * The constants of the kernel's FUSE protocol (include/uapi/linux/fuse.h), as far as a read-only
 * flat file system needs them. Numbers are part of the kernel ABI and never change; struct sizes
 * are the ones for the protocol minor this code speaks (`FUSE_MINOR`) and every later one.
 */

/** The protocol major version; the kernel and we must agree on it. */
export const FUSE_MAJOR = 7
/**
 * The highest minor this code implements: the struct layouts below are those of 7.38. The kernel
 * speaks the smaller of its minor and ours.
 */
export const FUSE_MINOR = 38
/**
 * The lowest kernel minor accepted. 7.28 brought `max_pages` (reads above 128 KiB); every
 * kernel of the last five years speaks more.
 */
export const FUSE_MIN_KERNEL_MINOR = 28

/** The node id of the root directory, fixed by the protocol. */
export const FUSE_ROOT_ID = 1

/** Request opcodes (`enum fuse_opcode`). */
export const Op = {
  LOOKUP: 1,
  FORGET: 2,
  GETATTR: 3,
  SETATTR: 4,
  READLINK: 5,
  SYMLINK: 6,
  MKNOD: 8,
  MKDIR: 9,
  UNLINK: 10,
  RMDIR: 11,
  RENAME: 12,
  LINK: 13,
  OPEN: 14,
  READ: 15,
  WRITE: 16,
  STATFS: 17,
  RELEASE: 18,
  FSYNC: 20,
  SETXATTR: 21,
  GETXATTR: 22,
  LISTXATTR: 23,
  REMOVEXATTR: 24,
  FLUSH: 25,
  INIT: 26,
  OPENDIR: 27,
  READDIR: 28,
  RELEASEDIR: 29,
  FSYNCDIR: 30,
  GETLK: 31,
  SETLK: 32,
  SETLKW: 33,
  ACCESS: 34,
  CREATE: 35,
  INTERRUPT: 36,
  BMAP: 37,
  DESTROY: 38,
  IOCTL: 39,
  POLL: 40,
  NOTIFY_REPLY: 41,
  BATCH_FORGET: 42,
  FALLOCATE: 43,
  READDIRPLUS: 44,
  RENAME2: 45,
  LSEEK: 46,
  COPY_FILE_RANGE: 47
} as const

/** The name of an opcode, for logs and errors. */
export function opName (opcode: number): string {
  for (const [name, value] of Object.entries(Op)) if (value === opcode) return name
  return `OP_${opcode}`
}

/** INIT flags (`fuse_init_in.flags` / `fuse_init_out.flags`), the ones this code uses. */
export const InitFlag = {
  ASYNC_READ: 1 << 0,
  BIG_WRITES: 1 << 5,
  AUTO_INVAL_DATA: 1 << 12,
  DO_READDIRPLUS: 1 << 13,
  WRITEBACK_CACHE: 1 << 16,
  PARALLEL_DIROPS: 1 << 18,
  ABORT_ERROR: 1 << 21,
  MAX_PAGES: 1 << 22,
  INIT_EXT: 1 << 30
} as const

/** OPEN / OPENDIR reply flags (`fuse_open_out.open_flags`). */
export const OpenFlag = {
  DIRECT_IO: 1 << 0,
  /** Do not drop the page cache on open: the file's bytes never change. */
  KEEP_CACHE: 1 << 1,
  /** Let the kernel keep the directory's entries cached. */
  CACHE_DIR: 1 << 3,
  /** Skip FLUSH on close (7.34+; older kernels ignore it). */
  NOFLUSH: 1 << 5
} as const

/** `FUSE_GETATTR_FH`: getattr_in.fh is valid. */
export const GETATTR_FH = 1 << 0
/** `FUSE_INTERRUPT` requests carry this bit in their own unique. */
export const INT_REQ_BIT = 1n

/** Linux errno numbers a reply can carry (sent negated in `fuse_out_header.error`). */
export const Errno = {
  EPERM: 1,
  ENOENT: 2,
  EINTR: 4,
  EIO: 5,
  EBADF: 9,
  EAGAIN: 11,
  EACCES: 13,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  EROFS: 30,
  ERANGE: 34,
  ENAMETOOLONG: 36,
  ENOSYS: 38,
  ENODATA: 61,
  EPROTO: 71
} as const

/** File type bits of `st_mode`. */
export const S_IFDIR = 0o040000
export const S_IFREG = 0o100000
/** `d_type` values of directory entries. */
export const DT_DIR = 4
export const DT_REG = 8

/** `open(2)` access mode mask and the bits of `access(2)`. */
export const O_ACCMODE = 0o3
export const O_RDONLY = 0
export const W_OK = 2

/** Byte sizes of the wire structs (7.38 layouts; none of these changed since). */
export const Size = {
  IN_HEADER: 40,
  OUT_HEADER: 16,
  ATTR: 88,
  ENTRY_OUT: 128,
  ATTR_OUT: 104,
  OPEN_OUT: 16,
  INIT_IN_MIN: 16,
  INIT_IN: 64,
  INIT_OUT: 64,
  KSTATFS: 80,
  READ_IN: 40,
  WRITE_IN: 40,
  GETXATTR_OUT: 8,
  DIRENT_HEADER: 24,
  FORGET_ONE: 16,
  /** The kernel refuses a device read into a buffer smaller than this. */
  MIN_READ_BUFFER: 8192
} as const

/** Name length limit the kernel enforces for FUSE (and the one STATFS reports). */
export const NAME_MAX = 255
