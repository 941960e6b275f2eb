import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { containerSkip, tenantCluster } from '../security/support.js'
import { timed } from '../support/index.js'

if (containerSkip !== undefined) console.log(`session tests skipped: ${containerSkip}`)
const ctest = containerSkip === undefined ? test : test.skip

ctest('session: cwd, variables, functions and background jobs carry from one run to the next; each run has its own exit code and streams', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'sess-1')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const s = await sb.session()
  defer(() => s.close())
  assert.is((await s.run('cd /tmp && export A=alpha && B=beta && f () { return 7; }')).exitCode, 0)
  const r = await s.run('pwd; echo "$A $B"; echo to-err >&2')
  assert.equal([r.exitCode, r.stdout, r.stderr], [0, '/tmp\nalpha beta\n', 'to-err\n'])
  assert.is((await s.run('f')).exitCode, 7)
  assert.is((await s.run('false')).exitCode, 1)
  const job = await s.run('sleep 1000 & echo $!')
  const pid = job.stdout.trim()
  assert.match(pid, /^\d+$/)
  assert.is((await s.run(`kill -0 ${pid} && echo alive`)).stdout, 'alive\n')
  // Output without a final newline keeps its last line; a run reads no stdin (it is /dev/null).
  assert.is((await s.run('printf abc')).stdout, 'abc')
  assert.is((await s.run('cat; echo after')).stdout, 'after\n')
  // Multi-line commands and quotes of every kind.
  assert.is((await s.run("for w in 'a b' \"c'd\"; do\n  echo \"[$w]\"\ndone")).stdout, "[a b]\n[c'd]\n")
  // Output shaped like a marker without the run's nonce is output.
  assert.is((await s.run("echo '__WARREN_0123456789abcdef01234567_0__'; echo '__WARREN_x_END__' >&2")).stdout, '__WARREN_0123456789abcdef01234567_0__\n')
  // A syntax error is the run's, and the session goes on.
  const bad = await s.run('if then fi (')
  assert.is.not(bad.exitCode, 0)
  assert.match(bad.stderr, /syntax error|unexpected/)
  assert.is((await s.run('echo "$A"')).stdout, 'alpha\n')
  // Runs given together run one after another.
  const many = await Promise.all([1, 2, 3, 4].map(async (i) => (await s.run(`echo ${i}; exit_code=${i}; (exit $exit_code)`))))
  assert.equal(many.map((m) => [m.stdout, m.exitCode]), [['1\n', 1], ['2\n', 2], ['3\n', 3], ['4\n', 4]])
  // Big output arrives whole; beyond maxOutputBytes it is cut, and the next run is unharmed.
  const big = await s.run('head -c 3000000 /dev/zero | tr "\\0" x')
  assert.is(big.stdout.length, 3_000_000)
  const cut = await s.run('yes | head -c 100000; echo e >&2', { maxOutputBytes: 1000 })
  assert.ok(cut.truncated)
  assert.is(cut.stdout.length + cut.stderr.length, 1000)
  assert.is((await s.run('echo next')).stdout, 'next\n')
}))

ctest('session: a run past its timeout is interrupted (124, reason timeout) and the session, its variables and jobs live on; exit ends it', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'sess-2')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const s = await sb.session({ cwd: '/tmp', user: 'sandbox', env: { GREETING: 'hi' } })
  defer(() => s.close())
  assert.is((await s.run('pwd; id -u; echo $GREETING')).stdout, '/tmp\n1000\nhi\n')
  await s.run('export KEEP=kept; sleep 1000 & echo $! > /tmp/job')
  const slow = await s.run('echo started; sleep 100; echo never', { timeoutMs: 500 })
  assert.is(slow.exitCode, 124)
  assert.is(slow.reason, 'timeout')
  assert.is(slow.stdout, 'started\n')
  assert.is((await s.run('echo $KEEP; kill -0 $(cat /tmp/job) && echo job-alive')).stdout, 'kept\njob-alive\n')
  // A command that ignores SIGINT is killed with its session.
  const stubborn = await s.run("trap '' INT; sleep 100", { timeoutMs: 300 })
  assert.is(stubborn.reason, 'timeout')
  assert.ok(s.closed)
  const after = await s.run('echo').catch((e: unknown) => e)
  assert.ok(isWarrenError(after, ErrorCodes.INVALID_ARGUMENT) && after.details?.field === 'session')

  const t = await sb.session()
  defer(() => t.close())
  const bye = await t.run('echo bye; exit 5')
  assert.equal([bye.exitCode, bye.stdout], [5, 'bye\n'])
  assert.ok(t.closed)
  assert.ok(isWarrenError(await t.run('echo').catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT))
  // A session that cannot start says why, naming the field.
  const nowhere = await sb.session({ cwd: '/no/such' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(nowhere, ErrorCodes.NOT_FOUND) && nowhere.details?.field === 'cwd', String(nowhere))
  const nobody = await sb.session({ user: 'nosuch' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(nobody, ErrorCodes.NOT_FOUND) && nobody.details?.field === 'user', String(nobody))
  // Bad run arguments.
  const u = await sb.session()
  defer(() => u.close())
  for (const [cmd, opts, field] of [['a\0b', {}, 'command'], ['true', { timeoutMs: -1 }, 'timeoutMs'], ['true', { maxOutputBytes: 1.5 }, 'maxOutputBytes']] as const) {
    const e = await u.run(cmd, opts).catch((x: unknown) => x)
    assert.ok(isWarrenError(e, ErrorCodes.INVALID_ARGUMENT) && e.details?.field === field, field)
  }
  await u.close()
  assert.ok(u.closed)
}))

test.run()
