/**
 * The agent's fuzz targets, each for a fixed number of inputs from a fixed seed (so a failure
 * reproduces): the msgpack reader, and the request path from socket bytes to the action. Runs
 * scripts/fuzz.mjs, which builds the targets with clang (libFuzzer, AddressSanitizer, UBSan) when
 * their sources changed. A crash, a leak, a sanitizer report or a missing clang fails the test:
 * it never passes by not running. `npm run fuzz` runs them for longer.
 */
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { timed } from '../../support/index.js'

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..')

/** Inputs per target: seconds each on an idle core, past every seed and well into mutations. */
const RUNS = { mp: 10_000, request: 10_000 }
const SEED = 1

interface TargetSummary { ok: boolean, runs: number, cov: number, execPerSec: number, problem?: string, exit?: number | string }

/** Runs one target through scripts/fuzz.mjs; its output, exit code and summary line. */
function fuzz (target: keyof typeof RUNS): Promise<{ code: number | null, output: string, summary: TargetSummary | undefined }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repo, 'scripts', 'fuzz.mjs'), `--runs=${RUNS[target]}`, `--seed=${SEED}`, `--target=${target}`],
      { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (b: Buffer) => { output += b.toString() })
    child.stderr.on('data', (b: Buffer) => { output += b.toString() })
    child.on('error', reject)
    child.on('close', (code) => {
      const line = /^fuzz summary (.*)$/m.exec(output)?.[1]
      const summary = line === undefined ? undefined : (JSON.parse(line) as { targets: Record<string, TargetSummary> }).targets[target]
      resolve({ code, output, summary })
    })
  })
}

/** The part of libFuzzer's output that says what went wrong, for the failure message. */
function tail (output: string): string {
  return output.split('\n').filter((l) => !l.startsWith('#') && !l.startsWith('"')).slice(-40).join('\n')
}

for (const target of ['mp', 'request'] as const) {
  test(`fuzz target ${target}: ${RUNS[target]} inputs (seed ${SEED}) without a crash, leak or sanitizer report`, timed(240_000, async () => {
    const { code, output, summary } = await fuzz(target)
    assert.ok(summary !== undefined, `no summary from scripts/fuzz.mjs (exit ${code}):\n${tail(output)}`)
    assert.ok(summary.ok && code === 0, `fuzz_${target} failed (${summary.problem ?? `exit ${summary.exit}`}):\n${tail(output)}`)
    assert.is(summary.runs, RUNS[target])
    // Coverage: the seeds alone reach far past the first header check of every reader / request.
    assert.ok(summary.cov > 150, `coverage ${summary.cov} is too low: the seeds did not load?`)
  }))
}

test.run()
