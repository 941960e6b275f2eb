// The Python SDK's pytest suite (python/tests), run by scripts/test.mjs after the uvu files,
// under Debian's /usr/bin/python3 with the package from python/src (nothing is installed).
//
// Its counts come from pytest's closing line ("3 passed, 1 failed, 2 errors in 4.2s"): errors
// count as failed. No python3, no pytest, a crash before that line, or a run past its time
// counts as one failed test, so a missing suite is never silent.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

export const PYTHON = '/usr/bin/python3'
const RUN_TIMEOUT_MS = Number(process.env.WARREN_TEST_PYTHON_TIMEOUT_MS ?? 1_200_000)

/** The test files, as paths relative to the repository (python/tests/test_*.py). */
export function findPythonTests (root) {
  const dir = join(root, 'python', 'tests')
  if (!existsSync(dir)) return []
  return readdirSync(dir).filter((n) => n.startsWith('test_') && n.endsWith('.py')).sort().map((n) => `python/tests/${n}`)
}

/** Why the suite cannot run here, or undefined. */
function missing () {
  if (!existsSync(PYTHON)) return `${PYTHON} is missing (install python3)`
  const r = spawnSync(PYTHON, ['-c', 'import pytest, websockets, msgpack'], { encoding: 'utf8' })
  if (r.status !== 0) return `${PYTHON} cannot import pytest, websockets and msgpack (node scripts/setup.mjs installs python3-pytest, python3-websockets, python3-msgpack): ${r.stderr.trim().split('\n').pop()}`
  return undefined
}

/** pytest's closing counts, or undefined when the text has no summary line. */
export function parseSummary (text) {
  const lines = text.split('\n').map((l) => l.replace(/^=+\s*|\s*=+$/g, '').trim())
  const line = lines.reverse().find((l) => / in [\d.]+s( \([^)]*\))?$/.test(l) && /\d+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)|no tests ran/.test(l))
  if (line === undefined) return undefined
  const count = (word) => Number(new RegExp(`(\\d+) ${word}\\b`).exec(line)?.[1] ?? 0)
  return {
    passed: count('passed') + count('xpassed'),
    failed: count('failed') + count('errors?'),
    skipped: count('skipped') + count('xfailed')
  }
}

/**
 * Runs pytest on `files` (repository-relative), echoing its output.
 * @returns {Promise<{passed: number, failed: number, skipped: number, ms: number, note: string}>}
 */
export function runPython (root, files) {
  const started = Date.now()
  const why = missing()
  if (why !== undefined) return Promise.resolve({ passed: 0, failed: 1, skipped: 0, ms: 0, note: why })
  return new Promise((resolve) => {
    const child = spawn(PYTHON, ['-m', 'pytest', '-q', '-rfE', '-p', 'no:cacheprovider', ...files], {
      cwd: root,
      env: {
        ...process.env,
        WARREN_TEST: '1',
        PYTHONPATH: join(root, 'python', 'src'),
        PYTHONDONTWRITEBYTECODE: '1',
        // the fixtures start `warren up` with this same Node
        WARREN_NODE: process.execPath
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true
    })
    let out = ''
    child.stdout.on('data', (b) => { process.stdout.write(b); out += b })
    child.stderr.on('data', (b) => { process.stderr.write(b); out += b })
    // pytest's own group (its warren up too, and the children tests start): one kill ends them all.
    const timer = setTimeout(() => {
      out += `\npytest: killed after ${RUN_TIMEOUT_MS} ms\n`
      try { process.kill(-child.pid, 'SIGKILL') } catch {}
    }, RUN_TIMEOUT_MS)
    // Its own group is not the terminal's: a Ctrl-C here has to be passed on.
    const interrupt = () => { try { process.kill(-child.pid, 'SIGINT') } catch {} }
    process.once('SIGINT', interrupt)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      process.off('SIGINT', interrupt)
      const ms = Date.now() - started
      const counts = parseSummary(out)
      if (counts === undefined) {
        resolve({ passed: 0, failed: 1, skipped: 0, ms, note: `no pytest summary (exit ${code ?? signal})` })
        return
      }
      // Exit 0 all passed, 1 some failed; anything else (interrupted, internal error, usage,
      // nothing collected) is a broken run even when the counts look clean.
      const broken = code !== 0 && code !== 1 && counts.failed === 0 ? 1 : 0
      resolve({ ...counts, failed: counts.failed + broken, ms, note: broken ? `pytest exit ${code ?? signal}` : '' })
    })
  })
}
