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
  // `warren --ca FILE CMD…`: the control plane's CA for every client command (as WARREN_CA).
  if (argv[0] === '--ca' || argv[0]?.startsWith('--ca=') === true) {
    const file = argv[0] === '--ca' ? argv[1] : argv[0].slice('--ca='.length)
    if (file === undefined || file === '') { process.stderr.write('warren: --ca needs a value (warren --ca FILE CMD…)\n'); return 2 }
    process.env.WARREN_CA = file
    argv = argv.slice(argv[0] === '--ca' ? 2 : 1)
  }
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
