/**
 * The connection to the kernel: the /dev/fuse file descriptor, the reader threads that take
 * requests off it, and reply writes.
 *
 * Replies are written with one synchronous writev(2) each, on the event loop. A write to
 * /dev/fuse never waits for anything: the kernel copies the reply (for a READ, straight into the
 * waiting page-cache pages) and returns. Doing it synchronously keeps replies off the libuv
 * threadpool, which readers of the mount in this same process may have filled (see reader.ts).
 */
import { closeSync, openSync, writevSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { createError, ErrorCodes } from '../../errors.js'
import type { ReaderData, ReaderMessage } from './reader.js'

/** What the channel tells its owner. */
export interface ChannelEvents {
  /** One request, exactly as the kernel sent it. */
  request (buf: Buffer): void
  /** A request the kernel failed itself (e.g. larger than the buffer); the connection goes on. */
  skipped (code: string): void
  /** Every reader has stopped and the descriptor is closed; `code` says why (ENODEV: unmounted). */
  end (code: string): void
}

/** The device side of one mount. */
export interface Channel {
  /** The /dev/fuse descriptor (passed to mount(8) as `fd=`). */
  readonly fd: number
  /** Starts `readers` reader threads; call once, after the mount exists. */
  start (readers: number, bufferBytes: number, events: ChannelEvents): void
  /**
   * Writes one reply (header and body parts) with a single writev.
   * @returns undefined when written, else the errno code (ENOENT: the request is gone, e.g.
   *          interrupted; ENODEV: the connection is over; EINVAL: the kernel refused the reply)
   */
  write (parts: readonly Uint8Array[]): string | undefined
  /** True once every reader has stopped and the descriptor is closed. */
  readonly ended: boolean
  /**
   * Closes the descriptor when no reader was ever started (a mount that failed). With readers
   * running the descriptor is closed when they end, which the connection's end causes.
   */
  closeUnstarted (): void
}

/**
 * The parent's Node flags minus those a worker refuses (`--input-type`, which a program started
 * with `node --input-type=module -e …` has, makes every Worker fail to start).
 */
function workerExecArgv (): string[] {
  const out: string[] = []
  for (let i = 0; i < process.execArgv.length; i++) {
    const a = process.execArgv[i]!
    if (a === '--input-type') i++
    else if (!a.startsWith('--input-type=')) out.push(a)
  }
  return out
}

/** Opens /dev/fuse. The descriptor is close-on-exec; mount(8) gets it through its stdio. */
export function openChannel (): Channel {
  let fd: number
  try {
    fd = openSync('/dev/fuse', 'r+')
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    throw createError(ErrorCodes.UNSUPPORTED, `cannot open /dev/fuse: ${e.message}`, { errno: e.code ?? 'EUNKNOWN' })
  }
  return new DeviceChannel(fd)
}

class DeviceChannel implements Channel {
  private started = false
  private closed = false
  private endCode: string | undefined
  private live = 0

  constructor (readonly fd: number) {}

  get ended (): boolean { return this.closed }

  start (readers: number, bufferBytes: number, events: ChannelEvents): void {
    if (this.started) throw createError(ErrorCodes.INTERNAL, 'FUSE channel started twice')
    this.started = true
    const data: ReaderData = { fd: this.fd, bufferBytes }
    for (let i = 0; i < Math.max(1, readers); i++) {
      const worker = new Worker(new URL('./reader.js', import.meta.url), { workerData: data, execArgv: workerExecArgv() })
      // Not unref'd: a live mount keeps the process alive, as a listening server does. An explicit
      // process.exit() still ends cleanly: the exit hook (mount.ts) ends the connection, which
      // wakes these threads so Node can join them.
      this.live++
      worker.on('message', (m: ReaderMessage) => {
        if (m.kind === 'request') events.request(Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength))
        else if (m.kind === 'skipped') events.skipped(m.code)
        else this.endCode ??= m.code
      })
      worker.on('error', (err) => { this.endCode ??= `EWORKER: ${err.message}` })
      worker.on('exit', () => {
        if (--this.live > 0) return
        this.closeFd()
        events.end(this.endCode ?? 'EXIT')
      })
    }
  }

  write (parts: readonly Uint8Array[]): string | undefined {
    if (this.closed) return 'EBADF'
    try {
      writevSync(this.fd, parts as Uint8Array[])
      return undefined
    } catch (err) {
      return (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN'
    }
  }

  closeUnstarted (): void {
    if (!this.started) this.closeFd()
  }

  private closeFd (): void {
    if (this.closed) return
    this.closed = true
    try { closeSync(this.fd) } catch { /* already closed */ }
  }
}
