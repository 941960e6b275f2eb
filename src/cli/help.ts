/**
 * `warren --help` (every command and its summary) and `warren CMD --help` / `warren help CMD`
 * (one command's synopsis and flags), both read from the table.
 */
import type { CommandSpec, FlagSpec } from './command.js'

const SUMMARY_COLUMN = 26

function flagLabel (name: string, f: FlagSpec): string {
  return f.type === 'boolean' ? `--${name}` : `--${name} ${f.value ?? 'VALUE'}`
}

function columns (left: string, right: string, width: number): string {
  return left.length + 2 <= width ? `  ${left.padEnd(width - 2)}${right}\n` : `  ${left}\n${' '.repeat(width)}${right}\n`
}

/** The list of all commands, for `warren`, `warren help` and `warren --help`. */
export function overview (table: readonly CommandSpec[]): string {
  let out = 'usage: warren <command> [flags]\n\ncommands:\n'
  for (const c of table) out += columns(c.args !== undefined ? `${c.name} ${c.args}` : c.name, c.summary, SUMMARY_COLUMN)
  out += '\n`warren help CMD` or `warren CMD --help` lists a command\'s flags.\n'
  return out
}

/** One command: synopsis, summary, details, and each flag with its help line. */
export function commandHelp (c: CommandSpec): string {
  const names = Object.keys(c.flags)
  let out = `usage: warren ${c.name}${names.length > 0 ? ' [flags]' : ''}${c.args !== undefined && c.args !== '' ? ` ${c.args}` : ''}\n\n${c.summary}\n`
  if (c.details !== undefined) out += `\n${c.details.trimEnd()}\n`
  // Every command takes -h/--help, so every command has a flags section.
  const rows: Array<[string, string]> = names.map((n) => {
    const f = c.flags[n]!
    return [flagLabel(n, f), f.help + (f.multiple === true ? ' (repeatable)' : '')]
  })
  rows.push(['-h, --help', 'this help'])
  const width = Math.min(34, Math.max(...rows.map(([l]) => l.length)) + 4)
  out += '\nflags:\n'
  for (const [label, help] of rows) out += columns(label, help, width)
  return out
}
