/**
 * exec through the agent: output in order with sequence numbers, stdin (bytes and streamed),
 * timeouts that kill the whole process group, the output cap, kills, and processes left in the
 * background that survive to the next exec.
 */
import { createHash, randomBytes } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits, connectAgent } from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { sleep, timed, waitFor } from '../../support/index.js'
import { bytes, registerLeftoverCheck, run, sandboxTest, sh, startSandbox } from './helpers.js'

sandboxTest('stdout and stderr arrive in the order written, each stream tagged', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const r = await run(client, ['sh', '-c', 'echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; sleep 0.05; echo d >&2; exit 3'])
  assert.equal(r.events, [['out', 'a\n'], ['err', 'b\n'], ['out', 'c\n'], ['err', 'd\n']])
  assert.is(r.result.exitCode, 3)
  assert.is(r.result.timedOut, false)
  assert.is(r.result.truncated, false)
  assert.ok(r.result.pid > 1)
  // A long stream stays in order (the client checks every frame's sequence number).
  const many = await sh(client, 'i=0; while [ $i -lt 20000 ]; do echo line$i; i=$((i+1)); done')
  const lines = many.trim().split('\n')
  assert.is(lines.length, 20000)
  assert.ok(lines.every((l, i) => l === `line${i}`))
}))

sandboxTest('cwd, env and uid apply; a missing program or cwd is an error, not an exit', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  assert.is(await sh(client, 'echo $FOO $HOME; pwd', { env: { FOO: 'bar' }, cwd: '/tmp' }), 'bar /root\n/tmp\n')
  assert.is(await sh(client, 'id -u; id -g', { uid: 1000 }), '1000\n1000\n')
  const denied = await run(client, ['sh', '-c', 'echo x > /root/x'], { uid: 1000 })
  assert.is.not(denied.result.exitCode, 0)
  const missing = await client.exec(['no-such-program']).catch((e: unknown) => e)
  assert.ok(isWarrenError(missing, ErrorCodes.NOT_FOUND), String(missing))
  assert.match((missing as Error).message, /no-such-program/)
  const noCwd = await client.exec(['true'], { cwd: '/nope' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(noCwd, ErrorCodes.NOT_FOUND), String(noCwd))
  const empty = await client.exec([]).catch((e: unknown) => e)
  assert.ok(isWarrenError(empty, ErrorCodes.INVALID_ARGUMENT))
}))

sandboxTest('stdin: bytes given up front, a large input, and a streamed one', timed(15_000, async (defer) => {
  const { client } = await startSandbox(defer)
  assert.is(await sh(client, 'cat', { stdin: bytes('hello stdin') }), 'hello stdin')
  // 3 MiB goes as streamed frames under the hood.
  const big = randomBytes(3 * 1024 * 1024)
  const sum = await sh(client, 'sha256sum | cut -d" " -f1', { stdin: big })
  assert.is(sum.trim(), createHash('sha256').update(big).digest('hex'))
  async function * slowly (): AsyncGenerator<Uint8Array> {
    for (let i = 0; i < 5; i++) { yield bytes(`part${i}\n`); await sleep(10) }
  }
  assert.is(await sh(client, 'cat', { stdin: slowly() }), 'part0\npart1\npart2\npart3\npart4\n')
  // Without stdin a command sees EOF at once instead of hanging.
  assert.is(await sh(client, 'cat; echo done'), 'done\n')
}))

sandboxTest('streamed stdin is sent only as fast as the command reads it: a command that reads late loses none of it, and the agent never holds more than the window', timed(60_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const total = 16 * 1024 * 1024
  const chunk = 256 * 1024
  let pulled = 0
  async function * input (): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < total; at += chunk) { pulled += chunk; yield Buffer.alloc(chunk, at / chunk) }
  }
  // Reads nothing until /tmp/go exists.
  const late = sh(client, 'while [ ! -e /tmp/go ]; do sleep 0.05; done; wc -c', { stdin: input() })
  await waitFor(() => pulled >= AgentLimits.stdinWindowBytes, 10_000, 'the window to be sent')
  // However long it waits, no more is taken from the source than the window, the pipe's 64 KiB
  // and the chunk in hand (before, the agent held whatever came: 300 MiB cost a 512 MiB VM 256 MiB of it).
  await sleep(500)
  assert.ok(pulled <= AgentLimits.stdinWindowBytes + 64 * 1024 + 2 * chunk, `${pulled} bytes pulled while nothing was read`)
  await client.exec(['touch', '/tmp/go'])
  assert.is((await late).trim(), String(total), 'every byte, once the command reads')
  // A command that closes its stdin early ends the stream: the rest of the source is not read.
  pulled = 0
  assert.is(await sh(client, 'head -c 10 | wc -c', { stdin: input() }), '10\n')
  assert.ok(pulled < total, `${pulled} of ${total} bytes pulled`)
}))

sandboxTest('a timeout kills the whole process group', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const started = Date.now()
  const r = await run(client, ['sh', '-c', 'sleep 1000 & sleep 1001 & echo started; wait'], { timeoutMs: 300 })
  assert.ok(Date.now() - started < 3000)
  assert.is(r.result.timedOut, true)
  assert.is(r.result.signal, 9)
  assert.is(r.result.exitCode, 137)
  assert.is(r.stdout, 'started\n')
  await waitFor(async () => !/sleep 100[01]/.test(await sh(client, 'ps')), 2000, 'the group\'s sleeps to die')
}))

sandboxTest('output beyond the cap is dropped and the result says truncated', timed(20_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const r = await run(client, ['sh', '-c', 'head -c 5000000 /dev/zero | tr "\\0" x; echo tail >&2'], { maxOutputBytes: 100_000 })
  assert.is(r.result.exitCode, 0, 'the command ran to its end: dropped output does not block it')
  assert.is(r.result.truncated, true)
  assert.is(r.stdout.length + r.stderr.length, 100_000)
  // The default cap is 16 MiB.
  let got = 0
  const d = await client.exec(['head', '-c', String(17 * 1024 * 1024), '/dev/zero'], {}, { onStdout: (c) => { got += c.length } })
  assert.is(d.truncated, true)
  assert.is(got, 16 * 1024 * 1024)
  const small = await run(client, ['echo', 'hi'], { maxOutputBytes: 100 })
  assert.is(small.result.truncated, false)
}))

sandboxTest('with a window, output stops at the credit and the command blocks; grants let it finish, byte for byte', timed(20_000, async (defer) => {
  const { client } = await startSandbox(defer)
  let got = 0
  let bad = 0
  const onStdout = (c: Uint8Array): void => { got += c.length; for (const b of c) if (b !== 120) bad++ }
  let settled = false
  const ex = client.startExec(['sh', '-c', 'head -c 1000000 /dev/zero | tr "\\0" x'], { windowBytes: 100_000 }, { onStdout })
  void ex.result.finally(() => { settled = true }).catch(() => {})
  await waitFor(() => got === 100_000, 5000, 'the window to be sent')
  await sleep(300)
  assert.is(got, 100_000, 'nothing beyond the credit')
  assert.is(settled, false, 'the command waits on its pipe')
  for (let i = 0; i < 9; i++) ex.grant(100_000)
  const r = await ex.result
  assert.is(r.exitCode, 0)
  assert.is(r.truncated, false)
  assert.is(got, 1_000_000)
  assert.is(bad, 0)

  // A command that ended with output still in its pipe: the exit waits until that was sent.
  let tail = 0
  let ended = false
  const short = client.startExec(['head', '-c', '30000', '/dev/zero'], { windowBytes: 1000 }, { onStdout: (c) => { tail += c.length } })
  void short.result.finally(() => { ended = true }).catch(() => {})
  await waitFor(() => tail === 1000, 5000, 'the window to be sent')
  await sleep(300)
  assert.is(ended, false, 'no exit before the rest of the output')
  short.grant(29_000)
  assert.is((await short.result).exitCode, 0)
  assert.is(tail, 30_000)

  // Past the cap nothing needs credit: the rest is dropped and the command ends.
  let capped = 0
  const c = await client.exec(['head', '-c', '500000', '/dev/zero'], { windowBytes: 50_000, maxOutputBytes: 50_000 }, { onStdout: (b) => { capped += b.length } })
  assert.is(c.truncated, true)
  assert.is(capped, 50_000)
}))

sandboxTest('a background process survives to the next exec, and sandbox state persists', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const r = await run(client, ['sh', '-c', 'sleep 1000 & echo $! > /tmp/bg.pid; echo state > /tmp/state'])
  assert.is(r.result.exitCode, 0)
  const pid = (await sh(client, 'cat /tmp/bg.pid')).trim()
  const ps = await sh(client, 'ps')
  assert.match(ps, new RegExp(`^\\s*${pid}\\s.*sleep 1000`, 'm'))
  assert.is(await sh(client, 'cat /tmp/state'), 'state\n')
  // Orphans are reaped by the agent: a finished background process leaves no zombie.
  await sh(client, 'sleep 0.05 &')
  await sleep(200)
  const states = await sh(client, 'cat /proc/[0-9]*/stat | cut -d" " -f3 | sort | uniq -c')
  assert.not.match(states, /Z/)
}))

sandboxTest('a background process that writes after its exec ended lives on (its output is dropped)', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const r = await run(client, ['sh', '-c', '(sleep 0.2; echo late; echo late >&2; sleep 1002) & echo now'])
  assert.is(r.stdout, 'now\n')
  await waitFor(async () => /sleep 1002/.test(await sh(client, 'ps')), 3000, 'the writer to go on past its write')
  assert.is(await sh(client, 'echo next'), 'next\n', 'its output does not leak into later execs')
}))

sandboxTest('kill signals the process group; an abort kills; a throwing handler kills and rejects', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const term = client.startExec(['sh', '-c', 'trap "echo got TERM; exit 3" TERM; echo ready; while true; do sleep 0.02; done'], {}, {
    onStdout: (c) => { if (new TextDecoder().decode(c).includes('ready')) void term.kill('SIGTERM') }
  })
  const tr = await term.result
  assert.is(tr.exitCode, 3)
  assert.is(tr.killed, true)
  const ac = new AbortController()
  const aborted = client.exec(['sleep', '1000'], { signal: ac.signal }, { onStart: () => ac.abort() })
  const ar = await aborted
  assert.is(ar.signal, 9)
  assert.is(ar.killed, true)
  const boom = new Error('handler failed')
  const thrown = await client.exec(['sh', '-c', 'echo x; sleep 1000'], {}, { onStdout: () => { throw boom } }).catch((e: unknown) => e)
  assert.is(thrown, boom)
  const ended = await client.kill(99999).catch((e: unknown) => e)
  assert.ok(isWarrenError(ended, ErrorCodes.NOT_FOUND))
  assert.not.match(await sh(client, 'ps'), /sleep 1000/)
}))

sandboxTest('many execs at once on one connection, and on several connections', timed(15_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => sh(client, `echo ${i}`)))
  assert.equal(results, Array.from({ length: 30 }, (_, i) => `${i}\n`))
  const other = await connectAgent(sb.socketPath)
  defer(() => other.close())
  assert.is(await sh(other, 'echo other'), 'other\n')
}))

sandboxTest('closing a connection kills the commands it was running', timed(10_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  const doomed = await connectAgent(sb.socketPath)
  let pid = 0
  const pending = doomed.exec(['sleep', '1001'], {}, { onStart: (i) => { pid = i.pid } }).catch((e: unknown) => e)
  await waitFor(() => pid, 2000, 'the command to start')
  await doomed.close()
  const err = await pending
  assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED))
  await waitFor(async () => !/sleep 1001/.test(await sh(client, 'ps')), 2000, 'the orphaned command to be killed')
}))

registerLeftoverCheck()
test.run()
