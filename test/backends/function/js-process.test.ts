/**
 * The `js` process pool: untrusted code runs in child processes, so exhausting the heap in any
 * way ends only that child (reason 'oom') while this process, standing in for the node, lives
 * on; children that are killed, time out without answering, or are retired are replaced; none
 * outlives close() or the node itself; and the pool refuses what it cannot serve.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { ExitCodes, type FunctionBackend } from '../../../src/backends/function/index.js'
import { causeOfDeath, showsHeapExhaustion, type ChildExit } from '../../../src/backends/function/js/exit-cause.js'
import type { ExecOptions, ExecResult, SandboxHandle } from '../../../src/backends/types.js'
import { descendantsOf, timed, waitFor } from '../../support/index.js'
import { collector, functionsDir, isAlive, openBackend, rejection } from './helpers.js'

interface Run { result: ExecResult, stdout: string, stderr: string }

async function js (backend: FunctionBackend, sandbox: SandboxHandle, source: string, opts: ExecOptions = {}): Promise<Run> {
  const out = collector()
  const result = await backend.exec(sandbox, ['js', source], { ...opts, ...out })
  return { result, stdout: out.stdout(), stderr: out.stderr() }
}

/** The pid of the pool's only child once it is ready (backends here have jsMaxProcesses 1). */
async function idleChild (backend: FunctionBackend): Promise<number> {
  await waitFor(() => backend.status().js.idle === 1, 10_000, 'a ready js process')
  return backend.status().js.pids[0]!
}

/** Kills `pids` at the end of a test that may have left them running (a failed one). */
function killAtEnd (defer: (fn: () => unknown) => void, pids: () => number[]): void {
  defer(() => {
    for (const pid of pids()) {
      try { process.kill(pid, 'SIGKILL') } catch {}
    }
  })
}

// Each grows one structure past a 64 MB heap. In a worker thread these abort the whole process
// (nodejs/node#47224); here they must end only the child.
const GROWERS: Array<[string, string]> = [
  ['an array', 'const a = []; for (let i = 0; ; i++) a.push(i)'],
  ['a Map', 'const m = new Map(); for (let i = 0; ; i++) m.set(i, i)'],
  ['an object', 'const o = {}; for (let i = 0; ; i++) o["k" + i] = i']
]

for (const [what, source] of GROWERS) {
  test(`${what} grown without bound ends its call as oom; this process lives on and the next call succeeds`, timed(60_000, async (defer) => {
    const backend = await openBackend(defer, {
      functionsDir: null,
      minThreads: 0,
      jsMinProcesses: 1,
      jsMaxProcesses: 1,
      resourceLimits: { maxOldGenerationSizeMb: 64 }
    })
    const sandbox = await backend.create()
    const before = await idleChild(backend)
    const run = await js(backend, sandbox, `console.log("growing"); ${source}`, { timeoutMs: 50_000 })
    assert.equal(run.result.reason, 'oom', JSON.stringify(run.result))
    assert.equal(run.result.exitCode, ExitCodes.KILLED)
    assert.match(run.result.message ?? '', /out of memory/)
    // Output written before the end still arrived.
    assert.equal(run.stdout, 'growing\n')
    assert.equal(isAlive(before), false, 'the child that ran out of memory is gone')

    const next = await js(backend, sandbox, 'console.log(6*7)')
    assert.equal(next.stdout, '42\n')
    assert.equal(next.result.exitCode, 0)
    assert.not.equal(backend.status().js.pids[0], before, 'a new child serves')
  }))
}

test('a killed call kills its child (SIGKILL); the pool replaces it', timed(20_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 1, jsMaxProcesses: 1 })
  const sandbox = await backend.create()
  const victim = await idleChild(backend)
  killAtEnd(defer, () => [victim])
  const controller = new AbortController()
  const out = collector()
  const running = backend.exec(sandbox, ['js', 'console.log("spinning"); for (;;) {}'], { ...out, signal: controller.signal, timeoutMs: 60_000 })
  // The loop cannot end before the time limit, so this line proves output streams while it runs.
  await waitFor(() => out.stdout() === 'spinning\n', 10_000, 'output of the running call')
  controller.abort()
  const result = await running
  assert.equal(result.reason, 'killed')
  assert.equal(result.exitCode, ExitCodes.KILLED)
  assert.equal(isAlive(victim), false)
  const next = await js(backend, sandbox, 'console.log("next")')
  assert.equal(next.stdout, 'next\n')
  assert.not.equal(backend.status().js.pids[0], victim)
}))

test('a child that does not answer by the time limit is killed and replaced', timed(20_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 1, jsMaxProcesses: 1, abortGraceMs: 50 })
  const sandbox = await backend.create()
  const stuck = await idleChild(backend)
  killAtEnd(defer, () => [stuck])
  // A stopped process cannot run its own timeout: only the node's timer can end this call.
  // The pool's pid is the jail's (bwrap); node runs below it.
  for (const pid of [stuck, ...descendantsOf(stuck)]) process.kill(pid, 'SIGSTOP')
  const run = await js(backend, sandbox, 'console.log(1)', { timeoutMs: 300 })
  assert.equal(run.result.reason, 'timeout')
  assert.equal(run.result.exitCode, ExitCodes.TIMEOUT)
  assert.equal(isAlive(stuck), false)
  const next = await js(backend, sandbox, 'console.log(2)')
  assert.equal(next.stdout, '2\n')
  assert.not.equal(backend.status().js.pids[0], stuck)
}))

test('a child is retired after jsCallsPerProcess calls and replaced', timed(20_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 1, jsMaxProcesses: 1, jsCallsPerProcess: 2 })
  const sandbox = await backend.create()
  const first = await idleChild(backend)
  for (const n of [1, 2]) assert.equal((await js(backend, sandbox, `console.log(${n})`)).stdout, `${n}\n`)
  await waitFor(() => !isAlive(first), 10_000, 'the retired child to be gone')
  assert.equal((await js(backend, sandbox, 'console.log(3)')).stdout, '3\n')
  assert.not.equal(backend.status().js.pids[0], first)
}))

test('close() leaves no child process, busy or idle', timed(20_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 2, jsMaxProcesses: 2 })
  const sandbox = await backend.create()
  const running = js(backend, sandbox, 'for (;;) {}', { timeoutMs: 60_000 })
  await waitFor(() => backend.status().js.busy === 1 && backend.status().js.idle === 1, 10_000, 'one busy and one idle child')
  const pids = backend.status().js.pids
  killAtEnd(defer, () => pids)
  assert.equal(pids.length, 2)
  assert.ok(pids.every(isAlive))
  await backend.close()
  for (const pid of pids) assert.equal(isAlive(pid), false, `child ${pid} is gone`)
  assert.equal((await running).result.reason, 'killed')
  assert.equal(backend.status().js.processes, 0)
}))

test('children, busy or idle, die with a node that is killed outright', timed(30_000, async (defer) => {
  const dir = await functionsDir(defer, {})
  const backendUrl = new URL('../../../src/backends/function/index.js', import.meta.url).href
  const script = join(dir, 'node.mjs')
  // A stand-in node: one child busy in an endless loop, one idle; prints their pids.
  await writeFile(script, `
    import { createFunctionBackend } from ${JSON.stringify(backendUrl)}
    const backend = createFunctionBackend({ functionsDir: null, minThreads: 0, jsMinProcesses: 2, jsMaxProcesses: 2 })
    const sandbox = await backend.create()
    void backend.exec(sandbox, ['js', 'for (;;) {}'], { timeoutMs: 60000 })
    const poll = setInterval(() => {
      const s = backend.status().js
      if (s.busy === 1 && s.idle === 1) { clearInterval(poll); console.log('PIDS ' + JSON.stringify(s.pids)) }
    }, 10)
    setInterval(() => {}, 1 << 30)
  `)
  const node = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  node.stdout.setEncoding('utf8').on('data', (s: string) => { out += s })
  const exited = new Promise((resolve) => node.once('exit', resolve))
  let pids: number[] = []
  killAtEnd(defer, () => [...pids, ...(node.pid === undefined ? [] : [node.pid])])

  const line = await waitFor(() => /PIDS (\[.*\])/.exec(out), 15_000, 'the stand-in node to report its children')
  pids = JSON.parse(line[1]!) as number[]
  assert.equal(pids.length, 2)
  assert.ok(pids.every(isAlive))
  node.kill('SIGKILL')
  await exited
  await waitFor(() => pids.every((pid) => !isAlive(pid)), 10_000, 'the orphaned children to end')
}))

test('js calls beyond the queue limit are refused with WARREN_ERR_OVERLOADED', timed(20_000, async (defer) => {
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 1, jsMaxProcesses: 1, maxQueue: 1 })
  const sandbox = await backend.create()
  const busy = new AbortController()
  const running = backend.exec(sandbox, ['js', 'for (;;) {}'], { signal: busy.signal, timeoutMs: 60_000 })
  await waitFor(() => backend.status().js.busy === 1, 10_000, 'the first call to run')
  const queued = js(backend, sandbox, 'console.log("queued")')
  await waitFor(() => backend.status().js.queued === 1, 10_000, 'the second call to queue')
  const refused = await rejection(backend.exec(sandbox, ['js', '1']))
  assert.ok(isWarrenError(refused, ErrorCodes.OVERLOADED), String(refused))
  busy.abort()
  assert.equal((await running).reason, 'killed')
  assert.equal((await queued).stdout, 'queued\n')
}))

test('children that cannot start: calls fail with a coded error instead of waiting', timed(20_000, async (defer) => {
  // A 1 MB heap is too small for Node to boot: every child dies before it is ready.
  const backend = await openBackend(defer, {
    functionsDir: null,
    minThreads: 0,
    jsMinProcesses: 1,
    jsMaxProcesses: 1,
    resourceLimits: { maxOldGenerationSizeMb: 1 },
    restartBackoffMs: 20,
    restartBackoffMaxMs: 100
  })
  const sandbox = await backend.create()
  for (let i = 0; i < 3; i++) {
    const err = await rejection(backend.exec(sandbox, ['js', '1']))
    assert.ok(isWarrenError(err, ErrorCodes.BACKEND_UNAVAILABLE), String(err))
  }
  await waitFor(() => backend.status().js.consecutiveFailures >= 2, 10_000, 'repeated start failures')
  assert.match(backend.status().js.lastFailure ?? '', /failed to start/)
}))

test('a js child gets an empty environment and only the flags it needs', timed(20_000, async (defer) => {
  if (process.platform !== 'linux') return
  const backend = await openBackend(defer, { functionsDir: null, minThreads: 0, jsMinProcesses: 1, jsMaxProcesses: 1, resourceLimits: { maxOldGenerationSizeMb: 64 } })
  const pid = await idleChild(backend)
  const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter((e) => e !== '').map((e) => e.split('=')[0])
  // Node's own IPC variables, and PWD that the shell sets; nothing of this process.
  assert.ok(env.every((name) => name.startsWith('NODE_CHANNEL_') || name === 'PWD'), env.join(' '))
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
  assert.ok(argv.includes('--max-old-space-size=64'), argv.join(' '))
  assert.ok(argv.includes('--experimental-vm-modules'), argv.join(' '))
  assert.not.ok(argv.some((a) => a.startsWith('--enable-source-maps')), 'the node flags are not inherited')
}))

test('exit causes: V8 heap exhaustion is oom, a kill by the node is killed, any other death crashed', timed(5000, () => {
  assert.ok(showsHeapExhaustion('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory'))
  assert.ok(showsHeapExhaustion('FATAL ERROR: CALL_AND_RETRY_LAST Allocation failed - JavaScript heap out of memory'))
  assert.ok(showsHeapExhaustion('# Fatal javascript OOM in GC during deserialization'))
  assert.not.ok(showsHeapExhaustion('Error: boom'))
  const died: ChildExit = { code: null, signal: 'SIGABRT', killedByNode: false, heapExhausted: true, lastError: 'FATAL ERROR: Reached heap limit' }
  assert.equal(causeOfDeath(died).reason, 'oom')
  assert.equal(causeOfDeath({ ...died, killedByNode: true }).reason, 'killed')
  const crashed = causeOfDeath({ ...died, heapExhausted: false, signal: 'SIGSEGV' })
  assert.equal(crashed.reason, 'crashed')
  assert.match(crashed.message, /SIGSEGV: FATAL ERROR/)
  assert.match(causeOfDeath({ ...died, heapExhausted: false, signal: null, code: 70, lastError: '' }).message, /exited with code 70$/)
}))

test.run()
