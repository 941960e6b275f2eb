#!/usr/bin/env node
// The `warren` command: a thin launcher for the compiled CLI.
import { main } from '../dist/src/cli/index.js'

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code },
  (err) => {
    process.stderr.write(`warren: ${err && err.code ? err.code + ': ' : ''}${err && err.message ? err.message : err}\n`)
    process.exitCode = 1
  }
)
