/**
 * Function backend: registered modules run in workers, stream their output while they run,
 * see stdin/env/args, and end with the documented exit codes and errors.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { ExitCodes, FunctionBackendDefaults } from '../../../src/backends/function/index.js'
import { timed, waitFor } from '../../support/index.js'
import { collector, functionsDir, openBackend, rejection } from './helpers.js'

const encode = (s: string): Uint8Array => new TextEncoder().encode(s)

test('a registered module runs; stdout and stderr arrive in the order written', timed(10_000, async (defer) => {
  const backend = await openBackend(defer)
  const sandbox = await backend.create()
  const out = collector()
  const result = await backend.exec(sandbox, ['interleave'], out)
  assert.equal(result.exitCode, 0)
  assert.equal(result.truncated, false)
  assert.is(result.reason, undefined)
  assert.ok(result.durationMs >= 0)
  const expected: Array<[string, string]> = []
  for (let i = 0; i < 5; i++) expected.push(['out', `out${i}\n`], ['err', `err${i}\n`])
  assert.equal(out.events, expected)
}))

test('output streams while the function runs, not when it ends', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, { functionsDir: dir })
  const sandbox = await backend.create()
  const out = collector()
  const gate = join(dir, 'gate-open')
  const running = backend.exec(sandbox, ['gate', gate], out)
  // The function cannot end before the gate file exists, so seeing its first line here proves
  // the line came while it was still running.
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'first line before the function ends')
  await writeFile(gate, '')
  const result = await running
  assert.equal(result.exitCode, 0)
  assert.equal(out.stdout(), 'waiting\nreleased\n')
}))

test('args, stdin and env reach the function; the node environment does not', timed(10_000, async (defer) => {
  const backend = await openBackend(defer)
  const sandbox = await backend.create({ env: { SHARED: 'from-sandbox', GREETING: 'overridden' } })
  const out = collector()
  const result = await backend.exec(sandbox, ['echo', 'one', 'two words'], {
    ...out,
    stdin: encode('line from stdin\n'),
    env: { GREETING: 'hello' }
  })
  assert.equal(result.exitCode, 0)
  assert.equal(out.stdout(), 'args=["one","two words"]\nline from stdin\n')
  assert.equal(out.stderr(), 'GREETING=hello SHARED=from-sandbox\nhost-env-keys=0\n')
}))

test('exit codes: returned value, throw, unloadable module, bad return value', timed(15_000, async (defer) => {
  const backend = await openBackend(defer)
  const sandbox = await backend.create()
  for (const code of [0, 3, 255]) {
    assert.equal((await backend.exec(sandbox, ['exit', String(code)])).exitCode, code)
  }

  const thrown = collector()
  assert.equal((await backend.exec(sandbox, ['throws'], thrown)).exitCode, ExitCodes.FAILED)
  assert.match(thrown.stderr(), /Error: kaput/)

  const noDefault = collector()
  assert.equal((await backend.exec(sandbox, ['nodefault'], noDefault)).exitCode, ExitCodes.CANNOT_EXECUTE)
  assert.match(noDefault.stderr(), /no default export function/)

  const broken = collector()
  assert.equal((await backend.exec(sandbox, ['broken'], broken)).exitCode, ExitCodes.CANNOT_EXECUTE)
  assert.match(broken.stderr(), /SyntaxError/)

  const bad = collector()
  assert.equal((await backend.exec(sandbox, ['badexit'], bad)).exitCode, ExitCodes.FAILED)
  assert.match(bad.stderr(), /not an exit code/)

  const rejected = collector()
  assert.equal((await backend.exec(sandbox, ['rejectlater'], rejected)).exitCode, ExitCodes.FAILED)
  assert.match(rejected.stderr(), /Uncaught \(in promise\).*forgotten/s)
}))

test('output beyond maxOutputBytes is dropped and the result says truncated', timed(10_000, async (defer) => {
  assert.equal(FunctionBackendDefaults.maxOutputBytes, 16 * 1024 * 1024)
  const backend = await openBackend(defer)
  const sandbox = await backend.create()

  const out = collector()
  // 10 chunks of 1000 bytes, alternating streams, against a cap of 2500 for both together.
  const result = await backend.exec(sandbox, ['flood', '1000', '10', 'both'], { ...out, maxOutputBytes: 2500 })
  assert.equal(out.bytes(), 2500)
  assert.equal(result.truncated, true)
  assert.equal(out.stdout(), 'a'.repeat(1000) + 'c'.repeat(500))
  assert.equal(out.stderr(), 'b'.repeat(1000))
  // write() told the function which chunks were kept whole: the first two.
  assert.equal(result.exitCode, 2)

  const under = collector()
  const full = await backend.exec(sandbox, ['flood', '1000', '3'], { ...under, maxOutputBytes: 3000 })
  assert.equal(full.truncated, false)
  assert.equal(under.bytes(), 3000)
}))

test('an unknown function is WARREN_ERR_NOT_FOUND; a malformed name or argv is INVALID_ARGUMENT', timed(10_000, async (defer) => {
  const backend = await openBackend(defer)
  const sandbox = await backend.create()
  const missing = await rejection(backend.exec(sandbox, ['no-such-function']))
  assert.ok(isWarrenError(missing, ErrorCodes.NOT_FOUND), String(missing))
  for (const argv of [['../etc/passwd'], ['a/b'], [''], [], ['js']]) {
    const err = await rejection(backend.exec(sandbox, argv))
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${JSON.stringify(argv)}: ${String(err)}`)
  }
  assert.equal(await backend.functions(), ['badexit', 'broken', 'cooperative', 'crash', 'echo', 'exit', 'flood', 'gate',
    'hog', 'interleave', 'js', 'loop', 'nodefault', 'rejectlater', 'throwlater', 'throws', 'whoami'])
}))

test('a module dropped into the directory later is found; an edited one is reloaded', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer, {})
  const backend = await openBackend(defer, { functionsDir: dir })
  const sandbox = await backend.create()
  assert.ok(isWarrenError(await rejection(backend.exec(sandbox, ['late'])), ErrorCodes.NOT_FOUND))
  await writeFile(join(dir, 'late.mjs'), 'export default () => 7')
  assert.equal((await backend.exec(sandbox, ['late'])).exitCode, 7)
  // A different size makes the edit visible even where mtime has coarse resolution.
  await writeFile(join(dir, 'late.mjs'), 'export default () => 8 // edited')
  assert.equal((await backend.exec(sandbox, ['late'])).exitCode, 8)
}))

test('files are unsupported; kill ends running calls and the sandbox', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, { functionsDir: dir })
  const sandbox = await backend.create()
  const f = backend.files
  for (const call of [
    () => f.read(sandbox, '/etc/hostname', { offset: 0, length: 10 }), () => f.write(sandbox, '/x', encode('x')), () => f.list(sandbox, '/'),
    () => f.stat(sandbox, '/'), () => f.mkdir(sandbox, '/d'), () => f.remove(sandbox, '/x'), () => f.rename(sandbox, '/x', '/y'), () => f.symlink(sandbox, '/l', '/x')
  ]) assert.ok(isWarrenError(await rejection(call()), ErrorCodes.UNSUPPORTED))

  const out = collector()
  const running = backend.exec(sandbox, ['gate', join(dir, 'never')], out)
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'call running')
  await backend.kill(sandbox)
  const result = await running
  assert.equal(result.reason, 'killed')
  assert.equal(result.exitCode, ExitCodes.KILLED)
  assert.ok(isWarrenError(await rejection(backend.exec(sandbox, ['exit', '0'])), ErrorCodes.SANDBOX_GONE))
  await backend.kill(sandbox) // idempotent
}))

test('aborting the exec signal kills the call; a throwing callback cuts it and exec rejects', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, { functionsDir: dir })
  const sandbox = await backend.create()

  const controller = new AbortController()
  const out = collector()
  const running = backend.exec(sandbox, ['gate', join(dir, 'never')], { ...out, signal: controller.signal })
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'call running')
  controller.abort()
  const result = await running
  assert.equal(result.reason, 'killed')

  const boom = new Error('consumer broke')
  const err = await rejection(backend.exec(sandbox, ['gate', join(dir, 'never')], { onStdout: () => { throw boom } }))
  assert.is(err, boom)
  // The sandbox still works.
  assert.equal((await backend.exec(sandbox, ['exit', '4'])).exitCode, 4)
}))

test('after close, calls are refused with WARREN_ERR_BACKEND_UNAVAILABLE and running ones are killed', timed(10_000, async (defer) => {
  const dir = await functionsDir(defer)
  const backend = await openBackend(defer, { functionsDir: dir })
  const sandbox = await backend.create()
  const out = collector()
  const running = backend.exec(sandbox, ['gate', join(dir, 'never')], out)
  await waitFor(() => out.stdout() === 'waiting\n', 5000, 'call running')
  await backend.close()
  assert.equal((await running).reason, 'killed')
  assert.ok(isWarrenError(await rejection(backend.exec(sandbox, ['exit', '0'])), ErrorCodes.BACKEND_UNAVAILABLE))
  assert.ok(isWarrenError(await rejection(backend.create()), ErrorCodes.BACKEND_UNAVAILABLE))
}))

test.run()
