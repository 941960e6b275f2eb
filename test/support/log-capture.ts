/** A log destination that keeps every line pino writes, for tests that read what was logged. */
export interface LogCapture {
  lines: string[]
  /** Every line so far, parsed. */
  records (): Array<Record<string, any>>
  write (s: string): void
}

export function captureLog (): LogCapture {
  const lines: string[] = []
  return {
    lines,
    write (s: string) { lines.push(s) },
    records: () => lines.flatMap((l) => l.split('\n')).filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, any>)
  }
}
