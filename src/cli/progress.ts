/**
 * Progress of long CLI work: a bar rewritten in place on a terminal, plain lines elsewhere (CI,
 * pipes). On stderr, so stdout carries only the result.
 */
export interface Progress {
  /** Starts the next step. */
  step (label: string): void
  /** A detail line of the current step (e.g. debootstrap's output). */
  detail (line: string): void
  done (): void
}

export function createProgress (steps: number, out: NodeJS.WriteStream = process.stderr): Progress {
  const tty = out.isTTY === true && process.env.CI === undefined
  let n = 0
  let label = ''
  const bar = (): string => {
    const width = 24
    const filled = Math.round((n / steps) * width)
    return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${n}/${steps} ${label}`
  }
  return {
    step (l) {
      n++
      label = l
      if (tty) out.write(`\r\x1b[2K${bar()}`)
      else out.write(`${n}/${steps} ${l}\n`)
    },
    detail (line) {
      if (tty) out.write(`\r\x1b[2K${bar()} — ${line.slice(0, 60)}`)
      else out.write(`    ${line}\n`)
    },
    done () {
      if (tty) out.write(`\r\x1b[2K${bar()}\n`)
    }
  }
}
