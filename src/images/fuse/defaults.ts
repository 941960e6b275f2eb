/**
 * Every tunable of the layer file system, in one object: a reader sees all the knobs at once and
 * a test overrides exactly the ones it needs (`mountLayerFs({ …, readTimeoutMs: 200 })`).
 */

const KiB = 1024
const MiB = 1024 * KiB

export const FuseDefaults = {
  /**
   * How long one `read` callback may take before the reader gets EIO. The callback fetches
   * chunks over HTTP; a sandbox must see an error, never hang, when the store is gone.
   */
  readTimeoutMs: 30_000,
  /** How long mount(8) and the kernel's INIT may take before mounting fails. */
  mountTimeoutMs: 10_000,
  /**
   * After a lazy unmount (the file system was busy), how long the detached mount keeps being
   * served for its last users before the connection is aborted (they then get ENOTCONN).
   */
  unmountLingerMs: 5_000,
  /**
   * Threads blocked in read(2) on /dev/fuse, each handing requests to the event loop. One
   * suffices for correctness (requests are served concurrently on the event loop, the reader only
   * dequeues them); a second hides the hand-off latency under load.
   */
  readers: 2,
  /**
   * Largest WRITE the kernel may send. The file system is read-only so none come, but the kernel
   * sizes its minimum read buffer from it, so a small value keeps each reader's buffer small.
   */
  maxWrite: 128 * KiB,
  /** Largest READ in 4 KiB pages (256 = 1 MiB); the kernel caps it at fs.fuse.max_pages_limit. */
  maxPages: 256,
  /** Readahead we accept; the kernel uses the smaller of this and its own offer. */
  maxReadahead: 1 * MiB,
  /**
   * The device's readahead window (its bdi read_ahead_kb), set after mounting; 0 keeps the
   * kernel's default (128 KiB). A larger window means fewer, larger READs on sequential reads.
   */
  readAheadKb: 1024,
  /** Background (readahead) requests the kernel keeps in flight at once. */
  maxBackground: 64,
  /** Above this many background requests the kernel treats the file system as congested. */
  congestionThreshold: 48,
  /** Seconds the kernel may cache a name → inode answer. Layer names never change meaning. */
  entryTimeoutS: 60,
  /** Seconds the kernel may cache a file's attributes. Layers are immutable. */
  attrTimeoutS: 3600,
  /** Seconds for the root directory's attributes (its listing changes as layers come and go). */
  rootAttrTimeoutS: 1,
  /** Permission bits of every layer file unless its entry says otherwise. */
  fileMode: 0o444,
  /** `st_blksize` the files report: the I/O size tools prefer for them. */
  blksize: 128 * KiB,
  /** The source column of the mount (`/proc/self/mountinfo`). */
  source: 'warren-layers',
  /** Mounted as `fuse.<subtype>`, which names it in mountinfo. */
  subtype: 'warren',
  mountBin: 'mount',
  umountBin: 'umount',
  /** Where the kernel's fusectl file system is (to abort a connection nobody answers for). */
  fusectlDir: '/sys/fs/fuse/connections',
  /** Interrupts for requests not seen yet are remembered this long (readers race the event loop). */
  interruptMemoryMs: 5_000,
  /** An interrupted request whose reader was not being killed is checked for a kill this often. */
  interruptPollMs: 100
}

export type FuseTunables = typeof FuseDefaults
