/**
 * The built-in `js` function: untrusted JavaScript with no way to the host (fs, process,
 * require, import, the host's Function), cut at its time limit, bounded in memory.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ExitCodes, type FunctionBackend } from '../../../src/backends/function/index.js'
import type { ExecOptions, ExecResult, SandboxHandle } from '../../../src/backends/types.js'
import { timed } from '../../support/index.js'
import { collector, functionsDir, openBackend } from './helpers.js'

interface Run { result: ExecResult, stdout: string, stderr: string }

async function js (backend: FunctionBackend, sandbox: SandboxHandle, source: string, opts: ExecOptions = {}, args: string[] = []): Promise<Run> {
  const out = collector()
  const result = await backend.exec(sandbox, ['js', source, ...args], { ...opts, ...out })
  return { result, stdout: out.stdout(), stderr: out.stderr() }
}

test('console.log(6*7) prints 42 and exits 0; a thrown error goes to stderr with exit 1', timed(10_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null })
  const sandbox = await backend.create()
  const ok = await js(backend, sandbox, 'console.log(6*7)')
  assert.equal(ok.stdout, '42\n')
  assert.equal(ok.stderr, '')
  assert.equal(ok.result.exitCode, 0)

  const thrown = await js(backend, sandbox, 'console.log("before")\nfunction f () { throw new Error("boom") }\nf()')
  assert.equal(thrown.result.exitCode, ExitCodes.FAILED)
  assert.equal(thrown.stdout, 'before\n')
  assert.match(thrown.stderr, /Uncaught[\s\S]*Error: boom[\s\S]*at f \(js:2:/)
  // No host paths or frames leak through the stack.
  assert.not.match(thrown.stderr, /node:|file:|warren:/)

  const syntax = await js(backend, sandbox, 'let x = ;')
  assert.equal(syntax.result.exitCode, ExitCodes.FAILED)
  assert.match(syntax.stderr, /SyntaxError/)

  const rejected = await js(backend, sandbox, 'Promise.reject(new TypeError("later"))')
  assert.equal(rejected.result.exitCode, ExitCodes.FAILED)
  assert.match(rejected.stderr, /Uncaught \(in promise\) TypeError: later/)

  const io = await js(backend, sandbox, 'console.log(JSON.stringify([args, env.WHO, stdin]))\nconsole.error("to stderr")',
    { stdin: new TextEncoder().encode('piped'), env: { WHO: 'me' } }, ['a', 'b'])
  assert.equal(io.stdout, '[["a","b"],"me","piped"]\n')
  assert.equal(io.stderr, 'to stderr\n')
}))

test('the sandbox has no Node globals: no process, require, timers, Buffer, fs', timed(10_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null })
  const sandbox = await backend.create()
  const names = ['process', 'require', 'module', 'exports', 'Buffer', 'setTimeout', 'setImmediate', 'queueMicrotask', 'FinalizationRegistry',
    'fetch', 'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'global', '__dirname']
  const run = await js(backend, sandbox, `console.log(JSON.stringify(${JSON.stringify(names)}.filter((n) => typeof globalThis[n] !== 'undefined')))`)
  assert.equal(run.stdout, '[]\n')

  for (const [source, error] of [
    ['process.exit(9)', /ReferenceError: process is not defined/],
    ['require("node:fs").writeFileSync("/tmp/x", "")', /ReferenceError: require is not defined/],
    ['import fs from "node:fs"', /SyntaxError/],
    // The keyword cannot be spelled with escapes: a source without the text "import" cannot call
    // import() (the runner relies on this to skip the import callback for such sources).
    ['\\u0069mport("node:fs")', /SyntaxError: Keyword must not contain escaped characters/],
    ['imp\\u006frt("node:fs")', /SyntaxError: Keyword must not contain escaped characters/]
  ] as const) {
    const refused = await js(backend, sandbox, source)
    assert.equal(refused.result.exitCode, ExitCodes.FAILED, source)
    assert.match(refused.stderr, error, source)
  }
}))

test('escapes through constructors, eval, import() and stack traces are refused', timed(15_000, async (defer) => {
  const dir = await functionsDir(defer, {})
  const marker = join(dir, 'escaped')
  const backend = await openBackend(defer, { functionsDir: null })
  const sandbox = await backend.create()
  // Each attempt tries to reach the host's process; on success it writes a file we can see.
  const source = `
    const MARKER = ${JSON.stringify(marker)}
    function escaped (p) {
      if (p && typeof p === 'object' && typeof p.pid === 'number') {
        p.getBuiltinModule('node:fs').writeFileSync(MARKER, 'escaped')
        return true
      }
      return false
    }
    function attempt (name, fn) {
      try { console.log(name, escaped(fn()) ? 'ESCAPED' : 'no process') } catch (e) { console.log(name, 'refused', e && e.name) }
    }
    attempt('this.constructor', () => this.constructor.constructor('return process')())
    attempt('globalThis.constructor', () => globalThis.constructor.constructor('return process')())
    attempt('Function', () => Function('return process')())
    attempt('arrow', () => (() => {}).constructor('return process')())
    attempt('async', () => (async () => {}).constructor('return process')())
    attempt('generator', () => (function * () {}).constructor('return process')())
    attempt('console.log', () => console.log.constructor('return process')())
    attempt('console', () => console.constructor.constructor('return process')())
    attempt('args', () => args.constructor.constructor('return process')())
    attempt('env', () => env.constructor.constructor('return process')())
    attempt('prototype', () => Object.getPrototypeOf(globalThis).constructor.constructor('return process')())
    attempt('eval', () => eval('process'))
    attempt('indirect eval', () => (0, eval)('process'))
    attempt('stack frames', () => {
      Error.prepareStackTrace = (e, frames) => frames.flatMap((f) => [f.getThis(), f.getFunction()])
      const values = (function probe () { return new Error('x').stack })()
      Error.prepareStackTrace = undefined
      for (const v of values) {
        if (v === undefined || v === null) continue
        try { const p = v.constructor.constructor('return process')(); if (escaped(p)) return p } catch (e) {}
      }
      throw new EvalError('no frame led out')
    })
    import('node:fs').then(
      () => console.log('import ESCAPED'),
      (e) => {
        console.log('import refused', e.name, e instanceof TypeError)
        attempt('import error', () => e.constructor.constructor('return process')())
      })
  `
  const run = await js(backend, sandbox, source)
  assert.equal(run.stderr, '')
  assert.equal(run.result.exitCode, 0)
  assert.not.match(run.stdout, /ESCAPED/)
  for (const name of ['this.constructor', 'globalThis.constructor', 'Function', 'arrow', 'async', 'generator',
    'console.log', 'console', 'args', 'env', 'prototype', 'eval', 'indirect eval', 'stack frames', 'import error']) {
    assert.match(run.stdout, new RegExp(`^${name.replace('.', '\\.')} refused EvalError$`, 'm'), name)
  }
  // The import() rejection is a TypeError of the sandbox's own realm.
  assert.match(run.stdout, /^import refused TypeError true$/m)
  assert.equal(existsSync(marker), false)
}))

test('output streams under the cap: beyond maxOutputBytes it is dropped and the result says truncated', timed(10_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null })
  const sandbox = await backend.create()
  const out = collector()
  // 100 lines of 100 bytes against a cap of 250 for both streams together.
  const result = await backend.exec(sandbox, ['js', 'for (let i = 0; i < 100; i++) (i % 2 ? console.error : console.log)("x".repeat(99))'],
    { ...out, maxOutputBytes: 250 })
  assert.equal(result.exitCode, 0)
  assert.equal(result.truncated, true)
  assert.equal(out.bytes(), 250)
  assert.equal(out.stdout(), 'x'.repeat(99) + '\n' + 'x'.repeat(50))
  assert.equal(out.stderr(), 'x'.repeat(99) + '\n')

  const under = collector()
  const full = await backend.exec(sandbox, ['js', 'console.log("x".repeat(99))'], { ...under, maxOutputBytes: 100 })
  assert.equal(full.truncated, false)
  assert.equal(under.stdout(), 'x'.repeat(99) + '\n')
}))

test('while(true){} is cut at the time limit, also inside a promise job', timed(15_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, maxThreads: 1 })
  const sandbox = await backend.create()
  for (const source of ['while (true) {}', 'Promise.resolve().then(() => { for (;;) {} })']) {
    const run = await js(backend, sandbox, source, { timeoutMs: 300 })
    assert.equal(run.result.exitCode, ExitCodes.TIMEOUT, source)
    assert.equal(run.result.reason, 'timeout', source)
  }
  assert.equal((await js(backend, sandbox, 'console.log(6*7)')).stdout, '42\n')
}))

test('unbounded allocation ends the call as oom and the backend serves the next call', timed(30_000, async (defer) => {
  const backend = await openBackend(defer, {
    functionsDir: null,
    maxThreads: 1,
    resourceLimits: { maxOldGenerationSizeMb: 48, maxYoungGenerationSizeMb: 8 }
  })
  const sandbox = await backend.create()
  const run = await js(backend, sandbox, 'const hoard = []; for (;;) hoard.push(new Array(100000).fill(hoard.length))', { timeoutMs: 20_000 })
  assert.equal(run.result.reason, 'oom')
  assert.equal(run.result.exitCode, ExitCodes.KILLED)
  const next = await js(backend, sandbox, 'console.log(6*7)')
  assert.equal(next.stdout, '42\n')
  assert.equal(next.result.exitCode, 0)
}))

test.run()
