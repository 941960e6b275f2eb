/**
 * The body of a reader thread (a worker_threads Worker): blocking read(2) calls on /dev/fuse,
 * each returning exactly one request, handed to the event loop as a transferred copy.
 *
 * Why a thread of its own rather than fs.read on the libuv threadpool: a read on /dev/fuse blocks
 * until the kernel has a request, so every read in flight pins one pool thread. With the default
 * four, a few idle reads starve every other fs call of the process (the layer cache's own disk
 * reads included), and a reply waiting on a pool thread can deadlock against a reader of the
 * mount in the same process. Replies are written synchronously from the event loop instead
 * (see channel.ts), so nothing of the file system waits on the pool.
 */
import { readSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'

/** What a reader thread is started with. */
export interface ReaderData {
  fd: number
  /** Size of the read buffer: the kernel refuses reads into less than its minimum. */
  bufferBytes: number
}

/** Messages from a reader thread. */
export type ReaderMessage =
  /** One request, exactly as read. */
  | { kind: 'request', bytes: Uint8Array }
  /** A read failed in a way that loses one request but not the connection (EIO: request too large). */
  | { kind: 'skipped', code: string }
  /** The connection is over (ENODEV after unmount, ECONNABORTED after abort) or unusable. */
  | { kind: 'end', code: string }

/** Errors after which reading again makes sense. */
const RETRY = new Set(['EINTR', 'EAGAIN', 'ENOENT'])
/** Errors that cost one request (the kernel already failed it) but leave the connection usable. */
const SKIP = new Set(['EIO', 'E2BIG'])

function loop (port: NonNullable<typeof parentPort>, data: ReaderData): void {
  const buf = Buffer.allocUnsafe(data.bufferBytes)
  for (;;) {
    let n: number
    try {
      n = readSync(data.fd, buf, 0, buf.length, null)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN'
      if (RETRY.has(code)) continue
      if (SKIP.has(code)) {
        port.postMessage({ kind: 'skipped', code } satisfies ReaderMessage)
        continue
      }
      port.postMessage({ kind: 'end', code } satisfies ReaderMessage)
      return
    }
    if (n === 0) {
      port.postMessage({ kind: 'end', code: 'EOF' } satisfies ReaderMessage)
      return
    }
    // A copy of just the request: the big buffer is reused, and a READ request is 80 bytes.
    const bytes = new Uint8Array(n)
    bytes.set(buf.subarray(0, n))
    port.postMessage({ kind: 'request', bytes } satisfies ReaderMessage, [bytes.buffer])
  }
}

if (parentPort !== null) loop(parentPort, workerData as ReaderData)
