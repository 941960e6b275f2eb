/** The public types of the layer file system. */
import type { WarrenError } from '../../errors.js'
import type { FuseTunables } from './defaults.js'

/** One file of the mount: a layer image. */
export interface LayerFileInfo {
  /** The file's name in the mount's one directory (no `/`, not `.` or `..`, at most 255 bytes). */
  name: string
  /** Its size in bytes; reads past it see end of file. */
  size: number
  /** Permission bits (default `FuseDefaults.fileMode`, 0444); write bits are dropped. */
  mode?: number
  /** Modification time reported by stat (default 0: layers are built with a fixed epoch). */
  mtimeMs?: number
}

/** Files looked up one name at a time, for callers holding many or deciding lazily. */
export interface LayerFileLookup {
  /** The file called `name`, if it exists now. */
  get (name: string): LayerFileInfo | undefined
  /** Every file, for directory listings. */
  list (): Iterable<LayerFileInfo>
}

/**
 * The files of the mount: a fixed list, a function giving the current list (called on each
 * lookup and listing), or a lookup object. A name keeps its inode, and so the kernel's cached
 * pages, as long as its size stays the same.
 */
export type LayerFiles = readonly LayerFileInfo[] | (() => Iterable<LayerFileInfo>) | LayerFileLookup

/**
 * Reads bytes of a layer file. Must resolve with exactly `length` bytes (the range is always
 * inside the file: the file system clamps reads to the size). Rejecting, resolving with the wrong
 * length, or taking longer than `readTimeoutMs` gives the reader EIO; `signal` is aborted when the
 * reader gives up (interrupt), the read timed out, or the file system is going away.
 */
export type LayerRead = (name: string, offset: number, length: number, signal: AbortSignal) => Promise<Uint8Array>

/** What `onError` is told besides the error itself. */
export interface LayerFsErrorContext {
  /** The FUSE operation, e.g. `READ`. */
  op: string
  name?: string
  offset?: number
  length?: number
}

/** Options of `mountLayerFs`; every tunable of `FuseDefaults` may be overridden too. */
export interface MountLayerFsOptions extends Partial<FuseTunables> {
  /** An existing empty directory. */
  mountpoint: string
  files: LayerFiles
  read: LayerRead
  /**
   * Failed and timed-out reads (with `details.name/offset/length`), refused replies, protocol
   * trouble: for the node's event log. The reader already got EIO; this is never a thrown error.
   */
  onError?: (err: WarrenError, context: LayerFsErrorContext) => void
}

/** Counters of one mount. */
export interface LayerFsStats {
  /** Requests the kernel sent. */
  requests: number
  /** READ requests answered with data. */
  reads: number
  /** Bytes answered to READ requests. */
  bytesRead: number
  /** READs answered EIO because the callback rejected or returned the wrong length. */
  readErrors: number
  /** READs answered EIO because the callback took longer than `readTimeoutMs`. */
  readTimeouts: number
  /** Requests answered EINTR because their reader was being killed. */
  interrupted: number
  /** INTERRUPTs for a signal that does not kill (a shell's SIGCHLD): the request was answered as usual. */
  interruptsDeferred: number
  /** Requests being served right now, and the most that ever were at once. */
  inFlight: number
  maxInFlight: number
}

/**
 * A mounted layer file system. While mounted it keeps the process alive, as a listening server
 * does; `process.exit()` still ends cleanly (the connection is aborted and the mount detached).
 */
export interface LayerFs {
  /** The canonical path it is mounted on. */
  readonly mountpoint: string
  /** What INIT settled: the protocol minor in use and the kernel's. */
  readonly protocol: { major: number, minor: number, kernelMinor: number, maxPages: number }
  /** Resolves when the kernel has closed the connection (unmounted, here or by anyone else). */
  readonly closed: Promise<void>
  stats (): LayerFsStats
  /**
   * Unmounts. When the mount is busy it is detached lazily and served for up to
   * `unmountLingerMs` more, then its connection is aborted (late users get ENOTCONN, never a
   * hang). Resolves when the connection is over. Idempotent; fine after an external umount.
   */
  unmount (): Promise<void>
}
