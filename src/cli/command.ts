/**
 * What one `warren` command is: its words (`ps`, `token create`), a one-line summary, its flags
 * and its handler. The table of them (table.ts) is the whole CLI: parsing, `--help` and
 * `warren help CMD` are all read from it, so adding a command is adding one entry.
 */

/** One flag of a command, as `node:util` parseArgs takes it plus what `--help` prints. */
export interface FlagSpec {
  type: 'string' | 'boolean'
  /** May be given more than once (`--label a=1 --label b=2`); the handler gets an array. */
  multiple?: boolean
  /** One line for `--help`. */
  help: string
  /** What `--help` shows as the value (`--ttl DURATION`); `VALUE` when not given. */
  value?: string
}

export type Flags = Record<string, FlagSpec>

/** The parsed values of `F`: a string, a string array for `multiple`, a boolean; absent when not given. */
export type FlagValues<F extends Flags> = {
  -readonly [K in keyof F]?: F[K] extends { type: 'boolean' } ? boolean : F[K] extends { multiple: true } ? string[] : string
}

/** What a handler gets: its flags, its positional words, and what came after `--`. */
export interface Invocation<F extends Flags> {
  values: FlagValues<F>
  positionals: string[]
  /** The words after `--` (a command to run), when the command takes one. */
  rest: string[]
}

/** A command of the table, with its flag types erased (what the dispatcher and help read). */
export interface CommandSpec {
  /** The words that name it: `ps`, `token create`. */
  name: string
  /** One line for `warren --help`. */
  summary: string
  /** Positional words and `-- CMD…` as the synopsis shows them (`ID -- CMD…`); empty when none. */
  args?: string
  /** Fewest and most positional words (default none). */
  positionals?: { min: number, max: number }
  /** Takes a command after `--`. */
  rest?: boolean
  /** More lines for `warren help CMD`: what it does beyond the summary, examples. */
  details?: string
  flags: Flags
  run: (inv: Invocation<Flags>) => Promise<number>
}

/**
 * Defines a command with its handler typed by its flags (the table then holds it erased).
 * @returns the command as the table holds it
 */
export function command<F extends Flags> (spec: Omit<CommandSpec, 'flags' | 'run'> & { flags: F, run: (inv: Invocation<F>) => Promise<number> }): CommandSpec {
  return spec as unknown as CommandSpec
}
