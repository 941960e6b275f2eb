#!/usr/bin/env node
// `npm run bench -- NAME [args…]` runs bench/NAME.ts (compiled). Its last line of output is one
// JSON object: {"bench":"NAME", …figures}.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const [name, ...args] = process.argv.slice(2)
const dir = join(root, 'dist', 'bench')
const names = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3)) : []
if (!name || !names.includes(name)) {
  process.stderr.write(`usage: npm run bench -- NAME   (one of: ${names.join(', ') || 'none built'})\n`)
  process.exit(2)
}
const child = spawn(process.execPath, ['--expose-gc', join(dir, `${name}.js`), ...args], { cwd: root, stdio: 'inherit' })
child.on('close', (code) => { process.exitCode = code ?? 1 })
