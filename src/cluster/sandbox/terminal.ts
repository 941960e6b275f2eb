/**
 * A running command's pseudo-terminal as its sandbox actor holds it: the size it was started
 * with, and the way a resize asked for by the trainer reaches the backend running it.
 */
import type { ExecTerminal, TerminalSize } from '../../backends/types.js'

export class ExecTerminalControl implements ExecTerminal {
  private listener: ((size: TerminalSize) => void) | undefined

  constructor (private size: TerminalSize) {}

  get cols (): number { return this.size.cols }
  get rows (): number { return this.size.rows }

  /** Called by the backend: how it hears of a new size. */
  onResize (resize: (size: TerminalSize) => void): void { this.listener = resize }

  /** Gives the terminal a new size (the command sees SIGWINCH). */
  resize (size: TerminalSize): void {
    this.size = size
    this.listener?.(size)
  }
}
