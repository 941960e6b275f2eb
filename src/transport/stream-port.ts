/**
 * What a stream end (writer or reader) needs from the link that carries it. Kept this narrow so
 * streams can be reasoned about without the rest of the link.
 */
import type { Frame } from './frames.js'

export interface StreamPort {
  /** True when stream frames may go out: a socket is attached and the resume exchange is done. */
  readonly live: boolean
  /** True while the link's buffered bytes are under its high-water mark. */
  readonly writable: boolean
  /**
   * Queues a frame on the link.
   * @throws as the outbox does (frame too large, overloaded)
   */
  push (frame: Frame): boolean
  /** The stream is finished on this side; the link forgets the id. */
  release (side: 'writer' | 'reader', sid: number): void
}
