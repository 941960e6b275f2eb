/**
 * The `warren` command. The commands, their flags and their help are one table (table.ts);
 * `warren --help` lists them, `warren help CMD` or `warren CMD --help` shows one.
 *
 * Exit codes: the command's own (run, exec), 0 on success, 1 when the cluster or a handler
 * refuses, 2 for a usage error (unknown command or flag, missing argument), 130 after Ctrl-C.
 */
import { describeFailure } from './failure.js'
import { resolve } from './dispatch.js'
import { stopOnBrokenPipe } from './stop.js'
import { COMMANDS } from './table.js'

export { COMMANDS } from './table.js'
export type { CommandSpec, FlagSpec } from './command.js'

let pipesWatched = false

/**
 * Runs `warren` with `argv` (without node and the script).
 * @returns the process's exit code
 */
export async function main (argv: string[]): Promise<number> {
  if (!pipesWatched) { stopOnBrokenPipe(); pipesWatched = true }
  let resolved: ReturnType<typeof resolve>
  try {
    resolved = resolve(COMMANDS, argv)
  } catch (err) {
    process.stderr.write(`warren: ${describeFailure(err)}\n`)
    return 2
  }
  if (resolved.kind === 'help') {
    process.stdout.write(resolved.text)
    return 0
  }
  try {
    return await resolved.command.run({ values: resolved.values, positionals: resolved.positionals, rest: resolved.rest })
  } catch (err) {
    process.stderr.write(`warren: ${describeFailure(err)}\n`)
    return 1
  }
}
