/**
 * The CLI's tables: columns padded to their widest cell, two spaces apart, the last column left
 * as long as it is. Cells can hold what tenants wrote (labels, names), so every control
 * character is shown escaped (`\x1b`, `\n`): a label cannot move the cursor, clear the screen or
 * retitle the terminal of whoever lists it, nor break a row in two.
 */
import type { Writable } from 'node:stream'

/** A cell as a terminal may show it: control characters (C0, DEL, C1) as `\xNN`, `\n`, `\t`, `\r`. */
export function printable (cell: string): string {
  return cell.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => {
    if (c === '\n') return '\\n'
    if (c === '\t') return '\\t'
    if (c === '\r') return '\\r'
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`
  })
}

/**
 * Writes `rows` (the first is the header) as a table.
 * @param out where the lines go
 */
export function writeTable (out: Pick<Writable, 'write'>, rows: readonly (readonly string[])[]): void {
  const cells = rows.map((r) => r.map(printable))
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)))
  for (const r of cells) out.write(r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i]!)).join('  ').trimEnd() + '\n')
}
