/**
 * `warren shell ID`: an interactive shell in a sandbox, on a pseudo-terminal. The local terminal
 * (when stdin is one) goes into raw mode, so every key, ^C included, reaches the sandbox's
 * terminal as typed; its size follows the local window (SIGWINCH). Ends with the shell's exit
 * code, the local terminal restored.
 */
import { RequestLimits } from '../cluster/index.js'
import type { ExecHandle } from '../sdk/index.js'
import { withClient } from './client.js'

/** The shell a sandbox offers: bash when it has it, else sh; a login shell, as ssh would start. */
const LOGIN_SHELL = 'if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l'

/** What the command reads and writes (the process's own unless a test gives others). */
export interface ShellIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean, setRawMode?: (raw: boolean) => unknown }
  stdout: NodeJS.WritableStream & { columns?: number, rows?: number }
}

/**
 * Opens an interactive shell in sandbox `id` and relays it to this terminal until it exits.
 * @returns the shell's exit code
 */
export async function shell (id: string, io: ShellIo = { stdin: process.stdin, stdout: process.stdout }): Promise<number> {
  const { stdin, stdout } = io
  // A window past the cluster's bound (a wall of monitors) gets the bound, not a refused shell.
  const cells = (n: number | undefined, fallback: number): number => Math.min(Math.max(1, n ?? fallback), RequestLimits.maxTerminalCells)
  const size = (): { cols: number, rows: number } => ({ cols: cells(stdout.columns, 80), rows: cells(stdout.rows, 24) })
  return await withClient(async (client) => {
    const raw = stdin.isTTY === true && typeof stdin.setRawMode === 'function'
    let handle: ExecHandle | undefined
    const onData = (data: Buffer | string): void => {
      // One write at a time, in order: the local input waits while the sandbox takes it.
      stdin.pause()
      handle?.write(data).then(() => stdin.resume(), () => {})
    }
    const onEnd = (): void => { handle?.closeStdin().catch(() => {}) }
    const onResize = (): void => { handle?.resize(size()).catch(() => {}) }
    try {
      const sb = await client.attach(id)
      handle = sb.spawn(['/bin/sh', '-c', LOGIN_SHELL], { pty: size(), openStdin: true, env: { TERM: process.env.TERM ?? 'xterm-256color' } })
      if (raw) stdin.setRawMode!(true)
      stdin.on('data', onData)
      stdin.on('end', onEnd)
      process.on('SIGWINCH', onResize)
      stdin.resume()
      for await (const chunk of handle) stdout.write(chunk.data)
      return (await handle.wait()).exitCode
    } finally {
      process.off('SIGWINCH', onResize)
      stdin.off('data', onData)
      stdin.off('end', onEnd)
      stdin.pause()
      if (raw) stdin.setRawMode!(false)
    }
  })
}
