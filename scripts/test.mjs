#!/usr/bin/env node
// Runs every compiled test file (dist/test/**/*.test.js) in its own Node process, one after the
// other, then the Python SDK's pytest suite (python/tests, see test-python.mjs), and ends with
// the line CI reads: `N passed, N failed`.
//
// Each file is one uvu program; its summary gives the counts. A file that dies before printing
// a summary, or outlives FILE_TIMEOUT_MS, counts as one failed test, so a crash is never silent.
//
//   npm test                 all files
//   npm test -- actors ws    files whose path contains "actors" or "ws" (dist/test/…, python/tests/…)
//   npm test -- python       only the Python tests
import { spawn } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { findPythonTests, runPython } from './test-python.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const testRoot = join(root, 'dist', 'test')
const FILE_TIMEOUT_MS = Number(process.env.WARREN_TEST_FILE_TIMEOUT_MS ?? 300_000)

function findTests (dir) {
  const out = []
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...findTests(p))
    else if (name.endsWith('.test.js')) out.push(p)
  }
  return out
}

const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, '')

function runFile (file) {
  return new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, ['--enable-source-maps', file], {
      cwd: root,
      env: { ...process.env, WARREN_TEST: '1' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let out = ''
    child.stdout.on('data', (b) => { process.stdout.write(b); out += b })
    child.stderr.on('data', (b) => { process.stderr.write(b); out += b })
    const timer = setTimeout(() => {
      out += `\n${relative(root, file)}: killed after ${FILE_TIMEOUT_MS} ms\n`
      child.kill('SIGKILL')
    }, FILE_TIMEOUT_MS)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const text = stripAnsi(out)
      const total = Number(/Total:\s+(\d+)/.exec(text)?.[1] ?? NaN)
      const passed = Number(/Passed:\s+(\d+)/.exec(text)?.[1] ?? NaN)
      const skipped = Number(/Skipped:\s+(\d+)/.exec(text)?.[1] ?? 0)
      const ms = Date.now() - started
      if (Number.isNaN(total) || Number.isNaN(passed)) {
        resolve({ passed: 0, failed: 1, skipped: 0, ms, note: `no summary (exit ${code ?? signal})` })
      } else {
        // uvu exits non-zero on failure; a non-zero exit with all passed means the file broke after its tests.
        const failed = total - passed - skipped + (code !== 0 && total === passed + skipped ? 1 : 0)
        resolve({ passed, failed, skipped, ms, note: '' })
      }
    })
  })
}

const filters = process.argv.slice(2)
// Filters match the path from the repository (dist/test/sdk/files.test.js, python/tests/test_cli.py),
// never the checkout's own location.
const selected = (path) => filters.length === 0 || filters.some((w) => path.includes(w))
const files = findTests(testRoot).filter((f) => selected(relative(root, f)))
const pythonFiles = findPythonTests(root).filter(selected)
let passed = 0; let failed = 0; let skipped = 0
const rows = []
for (const file of files) {
  const name = relative(testRoot, file)
  process.stdout.write(`\n# ${name}\n`)
  const r = await runFile(file)
  passed += r.passed; failed += r.failed; skipped += r.skipped
  rows.push(`${r.failed ? 'FAIL' : 'ok  '} ${name} (${r.passed} passed, ${r.failed} failed, ${(r.ms / 1000).toFixed(1)} s)${r.note ? ' ' + r.note : ''}`)
}
if (pythonFiles.length > 0) {
  const name = pythonFiles.length === findPythonTests(root).length ? 'python/tests' : pythonFiles.join(' ')
  process.stdout.write(`\n# ${name} (pytest)\n`)
  const r = await runPython(root, pythonFiles.length === findPythonTests(root).length ? ['python/tests'] : pythonFiles)
  passed += r.passed; failed += r.failed; skipped += r.skipped
  rows.push(`${r.failed ? 'FAIL' : 'ok  '} ${name} (${r.passed} passed, ${r.failed} failed, ${(r.ms / 1000).toFixed(1)} s)${r.note ? ' ' + r.note : ''}`)
}
process.stdout.write(`\n${rows.join('\n')}\n\n`)
process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`)
process.exitCode = failed === 0 && files.length + pythonFiles.length > 0 ? 0 : 1
