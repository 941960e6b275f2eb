/**
 * The supervised pool: recovers after its workers are killed, and when workers cannot start
 * (here: a preload module that throws while a marker file exists) it fails calls with a coded
 * error instead of letting them wait, rebuilds itself with backoff, and serves again once
 * workers can start.
 */
import { rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { startCall } from '../../../src/backends/function/call.js'
import { FunctionBackendDefaults } from '../../../src/backends/function/index.js'
import { createSupervisedPool, type SupervisedPool } from '../../../src/backends/function/pool.js'
import type { ExecResult } from '../../../src/backends/types.js'
import { timed, waitFor, type Cleanup } from '../../support/index.js'
import { collector, FIXTURES, functionsDir, openBackend, rejection } from './helpers.js'

function openPool (defer: Cleanup['defer'], preload: string[] = []): SupervisedPool {
  const pool = createSupervisedPool({
    minThreads: 2,
    maxThreads: 2,
    idleTimeoutMs: FunctionBackendDefaults.idleTimeoutMs,
    maxQueue: 100,
    resourceLimits: {},
    preload,
    restartBackoffMs: 20,
    restartBackoffMaxMs: 200
  })
  defer(async () => await pool.close())
  return pool
}

/** Runs fixture module `name` on the pool directly (no registry, no sandbox). */
function call (pool: SupervisedPool, dir: string, name: string, args: string[] = [], out = collector()): Promise<ExecResult> {
  return startCall(pool, {
    op: 'module',
    name,
    url: pathToFileURL(join(dir, `${name}.mjs`)).href,
    args,
    stdin: new Uint8Array(0),
    env: {},
    timeoutMs: 10_000,
    maxOutputBytes: 1 << 20
  }, { timeoutMs: 10_000, abortGraceMs: 100, maxOutputBytes: 1 << 20, ...out }).result
}

test('killed idle workers are replaced and the pool keeps serving', timed(15_000, async (defer) => {
  const dir = await functionsDir(defer)
  const pool = openPool(defer)
  assert.equal((await call(pool, dir, 'exit', ['1'])).exitCode, 1)
  await waitFor(() => pool.threads().length === 2, 5000, 'two workers')
  const victims = [...pool.threads()]
  await Promise.all(victims.map(async (w) => await w.terminate()))
  assert.equal((await call(pool, dir, 'exit', ['2'])).exitCode, 2)
  assert.ok(pool.threads().every((w) => !victims.includes(w)), 'new workers')
  assert.equal(pool.status().state, 'up')
}))

test('calls running on killed workers end as crashed; the next calls succeed', timed(15_000, async (defer) => {
  const dir = await functionsDir(defer)
  const pool = openPool(defer)
  const outs = [collector(), collector()]
  const running = outs.map((out) => call(pool, dir, 'gate', [join(dir, 'never')], out))
  await waitFor(() => outs.every((o) => o.stdout() === 'waiting\n'), 5000, 'both calls running')
  await Promise.all(pool.threads().map(async (w) => await w.terminate()))
  for (const result of await Promise.all(running)) assert.equal(result.reason, 'crashed')
  const again = await Promise.all([call(pool, dir, 'exit', ['3']), call(pool, dir, 'exit', ['4'])])
  assert.equal(again.map((r) => r.exitCode), [3, 4])
}))

for (const [how, failure, expected] of [
  ['throws', "throw new Error('preload cannot start')", /preload cannot start/],
  ['exits', 'process.exit(1)', /exited with code 1/]
] as const) {
test(`workers that cannot start (preload ${how}): calls fail with a coded error, the pool rebuilds with backoff and recovers`, timed(30_000, async (defer) => {
  const dir = await functionsDir(defer, { ...FIXTURES, preload: '' })
  const marker = join(dir, 'broken')
  await writeFile(marker, '')
  // A real start-up failure: the preload throws while the marker exists.
  await writeFile(join(dir, 'preload.mjs'), `import { existsSync } from 'node:fs'
    if (existsSync(${JSON.stringify(marker)})) ${failure}`)
  const backend = await openBackend(defer, {
    functionsDir: dir,
    preload: [join(dir, 'preload.mjs')],
    minThreads: 2,
    maxThreads: 2,
    restartBackoffMs: 20,
    restartBackoffMaxMs: 200
  })
  const sandbox = await backend.create()

  // Many calls at once, more than there are workers: every one ends with a coded error, none waits forever.
  const settled = await Promise.allSettled(Array.from({ length: 6 }, async () => await backend.exec(sandbox, ['exit', '0'])))
  for (const s of settled) {
    assert.equal(s.status, 'rejected')
    assert.ok(isWarrenError((s as PromiseRejectedResult).reason, ErrorCodes.BACKEND_UNAVAILABLE), String((s as PromiseRejectedResult).reason))
  }
  // The supervisor keeps rebuilding, with growing waits, while start-up keeps failing.
  await waitFor(() => backend.status().pool.consecutiveFailures >= 3, 10_000, 'repeated rebuilds')
  const status = backend.status().pool
  assert.ok(status.generation >= 3, `generation ${status.generation}`)
  assert.match(status.lastFailure ?? '', expected)
  const err = await rejection(backend.exec(sandbox, ['exit', '0']))
  assert.ok(isWarrenError(err, ErrorCodes.BACKEND_UNAVAILABLE), String(err))

  await rm(marker)
  const result = await waitFor(async () => await backend.exec(sandbox, ['exit', '5']).catch(() => undefined), 10_000, 'recovery')
  assert.equal(result.exitCode, 5)
  assert.equal(backend.status().pool.state, 'up')
  assert.equal(backend.status().pool.consecutiveFailures, 0)
}))
}

test('close() rejects calls waiting for a worker with a coded error', timed(15_000, async (defer) => {
  const dir = await functionsDir(defer)
  const pool = openPool(defer)
  const outs = [collector(), collector()]
  const running = outs.map((out) => call(pool, dir, 'gate', [join(dir, 'never')], out))
  await waitFor(() => outs.every((o) => o.stdout() === 'waiting\n'), 5000, 'both workers busy')
  const waiting = call(pool, dir, 'exit', ['0'])
  await waitFor(() => pool.status().queued === 1, 5000, 'a queued call')
  const refused = rejection(waiting)
  await pool.close()
  const err = await refused
  assert.ok(isWarrenError(err, ErrorCodes.BACKEND_UNAVAILABLE), String(err))
  assert.equal((err as { details?: { reason?: string } }).details?.reason, 'closed')
  // Calls already running on closed workers end too (the backend kills them before closing).
  await Promise.allSettled(running)
}))

test.run()
