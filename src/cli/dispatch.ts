/**
 * From argv to a handler: finds the command in the table by its words, splits off `-- CMD…`,
 * parses the flags strictly (an unknown flag is refused, naming it) and answers `--help`.
 * A refusal here is a usage error: the dispatcher prints it and the exit code is 2.
 */
import { parseArgs } from 'node:util'
import { createError, ErrorCodes, type WarrenError } from '../errors.js'
import type { CommandSpec, FlagValues, Flags } from './command.js'
import { commandHelp, overview } from './help.js'

export type Resolved =
  | { kind: 'help', text: string }
  | { kind: 'run', command: CommandSpec, values: FlagValues<Flags>, positionals: string[], rest: string[] }

const usage = (message: string, field?: string): WarrenError =>
  createError(ErrorCodes.INVALID_ARGUMENT, message, field !== undefined ? { field } : undefined)

/** The command whose words start `words`, the longest such (`sim plan` before `sim`). */
export function findCommand (table: readonly CommandSpec[], words: readonly string[]): CommandSpec | undefined {
  let best: CommandSpec | undefined
  for (const c of table) {
    const name = c.name.split(' ')
    if (name.every((w, i) => words[i] === w) && (best === undefined || name.length > best.name.split(' ').length)) best = c
  }
  return best
}

/** The refusal for words that name no command: the unknown word, or the subcommands of a known group. */
function unknownCommand (table: readonly CommandSpec[], words: readonly string[]): WarrenError {
  const group = table.filter((c) => c.name.split(' ')[0] === words[0])
  if (group.length === 0) return usage(`unknown command ${JSON.stringify(words[0])} (warren --help lists the commands)`, 'command')
  const subs = group.map((c) => c.name.split(' ').slice(1).join(' ')).filter((s) => s !== '')
  const given = words[1] === undefined || words[1].startsWith('-') ? 'needs a subcommand' : `has no subcommand ${JSON.stringify(words[1])}`
  return usage(`warren ${words[0]} ${given}: one of ${subs.join(', ')}`, 'command')
}

/** parseArgs's refusals, as INVALID_ARGUMENT naming the flag. */
function flagError (err: unknown, c: CommandSpec): WarrenError {
  const message = err instanceof Error ? err.message : String(err)
  const flag = /'(-{1,2}[^' <]+)/.exec(message)?.[1]
  const code = (err as { code?: unknown }).code
  const see = `(warren ${c.name} --help lists its flags)`
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && flag !== undefined) return usage(`warren ${c.name}: unknown flag ${flag} ${see}`, flag.replace(/^-+/, ''))
  if (flag !== undefined) {
    const spec = c.flags[flag.replace(/^-+/, '')]
    const why = spec?.type === 'boolean'
      ? 'takes no value'
      // parseArgs does not take `--flag -1` (the value looks like a flag): `--flag=-1` it takes.
      : /starting with a dash/.test(message)
        ? `takes a value starting with a dash as ${flag}=VALUE`
        : `needs a value (${flag} ${spec?.value ?? 'VALUE'})`
    return usage(`warren ${c.name}: ${flag} ${why} ${see}`, flag.replace(/^-+/, ''))
  }
  return usage(`warren ${c.name}: ${message} ${see}`)
}

/**
 * Resolves argv against the table: help text to print, or a command with its parsed arguments.
 * @throws INVALID_ARGUMENT (with `details.field`) for an unknown command or flag, a missing
 *   value, or the wrong number of positional words
 */
export function resolve (table: readonly CommandSpec[], argv: readonly string[]): Resolved {
  const first = argv[0]
  if (first === undefined || first === '--help' || first === '-h') return { kind: 'help', text: overview(table) }
  if (first === 'help') {
    if (argv.length === 1) return { kind: 'help', text: overview(table) }
    const c = findCommand(table, argv.slice(1))
    if (c !== undefined && c.name.split(' ').length === argv.length - 1) return { kind: 'help', text: commandHelp(c) }
    // `warren help token`: a group's word alone shows each of its commands.
    const group = argv.length === 2 ? table.filter((o) => o.name.startsWith(`${argv[1]} `)) : []
    if (group.length > 0 && c === undefined) return { kind: 'help', text: group.map(commandHelp).join('\n') }
    throw unknownCommand(table, argv.slice(1))
  }
  const c = findCommand(table, argv)
  if (c === undefined) throw unknownCommand(table, argv)
  const args = argv.slice(c.name.split(' ').length)
  const dashes = args.indexOf('--')
  const before = dashes < 0 ? args : args.slice(0, dashes)
  const rest = dashes < 0 ? [] : args.slice(dashes + 1)
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({ args: before, options: { ...c.flags, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true })
  } catch (err) {
    throw flagError(err, c)
  }
  const { help, ...values } = parsed.values
  if (help === true) return { kind: 'help', text: commandHelp(c) }
  const { min, max } = c.positionals ?? { min: 0, max: 0 }
  const n = parsed.positionals.length
  if (n > max) {
    // A word where none belongs may be a mistyped subcommand (`warren sim plna`).
    const head = c.name.split(' ')[0]!
    if (max === 0 && c.name === head && table.some((o) => o.name.startsWith(`${head} `))) throw unknownCommand(table, [head, parsed.positionals[0]!])
    throw usage(`warren ${c.name} takes ${max === 0 ? 'no arguments' : `at most ${max}`}, got ${JSON.stringify(parsed.positionals[max])} (warren ${c.name} --help)`)
  }
  if (n < min) throw usage(`usage: warren ${c.name} ${c.args ?? ''}`.trimEnd() + ` (warren ${c.name} --help)`)
  if (c.rest === true && rest.length === 0) throw usage(`warren ${c.name} needs a command after --: warren ${c.name} ${c.args ?? '-- CMD…'}`, 'command')
  if (c.rest !== true && dashes >= 0) throw usage(`warren ${c.name} takes no command after --`)
  return { kind: 'run', command: c, values: values as FlagValues<Flags>, positionals: parsed.positionals, rest }
}
