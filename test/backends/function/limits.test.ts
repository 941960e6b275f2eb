/**
 * Function backend limits: a time limit that stops even a synchronous infinite loop, crashes
 * and out-of-memory that end only their own call, while a concurrent call finishes normally.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ExitCodes, type FunctionBackend } from '../../../src/backends/function/index.js'
import type { SandboxHandle } from '../../../src/backends/types.js'
import { timed, waitFor } from '../../support/index.js'
import { collector, functionsDir, openBackend } from './helpers.js'

/** The thread id of the worker that runs the next call (with one worker: the pool's only one). */
async function whoami (backend: FunctionBackend, sandbox: SandboxHandle): Promise<string> {
  const out = collector()
  assert.equal((await backend.exec(sandbox, ['whoami'], out)).exitCode, 0)
  return out.stdout()
}

test('a synchronous infinite loop is cut at the time limit and its worker replaced', timed(15_000, async (defer) => {
  // One worker only: if the looping worker were not terminated, the next call could never run.
  const backend = await openBackend(defer, { minThreads: 1, maxThreads: 1, abortGraceMs: 50 })
  const sandbox = await backend.create()
  const before = await whoami(backend, sandbox)
  const result = await backend.exec(sandbox, ['loop'], { timeoutMs: 300 })
  assert.equal(result.exitCode, ExitCodes.TIMEOUT)
  assert.equal(result.reason, 'timeout')
  assert.ok(result.durationMs >= 300, `ended after ${result.durationMs} ms`)
  assert.not.equal(await whoami(backend, sandbox), before, 'the looping worker was replaced')
}))

test('on timeout ctx.signal aborts first, and a function that stops in time keeps its worker', timed(15_000, async (defer) => {
  // A grace far longer than the test: ending well before it proves the function stopped itself.
  const backend = await openBackend(defer, { minThreads: 1, maxThreads: 1, abortGraceMs: 60_000 })
  const sandbox = await backend.create()
  const before = await whoami(backend, sandbox)
  const out = collector()
  const result = await backend.exec(sandbox, ['cooperative'], { ...out, timeoutMs: 200 })
  assert.equal(result.exitCode, ExitCodes.TIMEOUT)
  assert.equal(result.reason, 'timeout')
  assert.equal(out.stdout(), 'waiting\naborted:timeout\n')
  assert.equal(await whoami(backend, sandbox), before, 'the same worker serves the next call')
}))

test('a crashing worker (process.exit, uncaught exception, OOM) fails only its call', timed(30_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, {
    functionsDir: dir,
    minThreads: 2,
    maxThreads: 2,
    resourceLimits: { maxOldGenerationSizeMb: 48, maxYoungGenerationSizeMb: 8 }
  })
  const sandbox = await backend.create()

  // A long call holds one worker for the whole test; each crash happens on the other one.
  const gate = join(dir, 'gate-open')
  const out = collector()
  const survivor = backend.exec(sandbox, ['gate', gate], out)
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'the concurrent call to start')

  const exited = await backend.exec(sandbox, ['crash'])
  assert.equal(exited.reason, 'crashed')
  assert.equal(exited.exitCode, ExitCodes.CRASHED)
  assert.match(exited.message ?? '', /exited with code: 3/)

  const uncaught = await backend.exec(sandbox, ['throwlater'])
  assert.equal(uncaught.reason, 'crashed')
  assert.match(uncaught.message ?? '', /async boom/)

  const oom = await backend.exec(sandbox, ['hog'])
  assert.equal(oom.reason, 'oom')
  assert.equal(oom.exitCode, ExitCodes.KILLED)

  await writeFile(gate, '')
  const result = await survivor
  assert.equal(result.exitCode, 0)
  assert.is(result.reason, undefined)
  assert.equal(out.stdout(), 'waiting\nreleased\n')
  // And the pool still serves.
  assert.equal((await backend.exec(sandbox, ['exit', '9'])).exitCode, 9)
}))

test('calls beyond the queue limit are refused with WARREN_ERR_OVERLOADED', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, { functionsDir: dir, minThreads: 1, maxThreads: 1, maxQueue: 1 })
  const sandbox = await backend.create()
  const gate = join(dir, 'gate-open')
  const out = collector()
  const running = backend.exec(sandbox, ['gate', gate], out)
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'the first call to run')
  // A waiting call is bound by its time limit too, and leaves the queue.
  const expired = await backend.exec(sandbox, ['exit', '4'], { timeoutMs: 100 })
  assert.equal(expired.reason, 'timeout')
  assert.equal(expired.exitCode, ExitCodes.TIMEOUT)
  assert.equal(backend.status().pool.queued, 0)
  const queued = backend.exec(sandbox, ['exit', '2'])
  await waitFor(() => backend.status().pool.queued === 1, 5000, 'the second call to queue')
  const refused = await backend.exec(sandbox, ['exit', '3']).then(() => undefined, (err: unknown) => err)
  assert.equal((refused as { code?: string } | undefined)?.code, 'WARREN_ERR_OVERLOADED')
  await writeFile(gate, '')
  assert.equal((await running).exitCode, 0)
  assert.equal((await queued).exitCode, 2)
}))

test.run()
