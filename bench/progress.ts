/**
 * Progress for long work: a rewritten status line in a terminal, plain lines elsewhere (CI,
 * pipes). Always on stderr, so a benchmark's stdout ends with its JSON line alone.
 */
const tty = process.stderr.isTTY === true && process.env.CI === undefined

export function progress (line: string): void {
  if (tty) process.stderr.write(`\r\x1b[2K${line}`)
  else process.stderr.write(`${line}\n`)
}

/** Ends a rewritten status line so the next output starts clean. */
export function progressDone (): void {
  if (tty) process.stderr.write('\n')
}
