import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes, createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { cli, exited, warren, warrenUp } from './support.js'

const noContainers = containerUnavailable()
const stack = /^\s+at /m

/** The sandboxes `warren ps --label` lists (ended ones too, with `all`), as [id, state] pairs. */
async function listed (env: NodeJS.ProcessEnv, label: string, all = true): Promise<Array<[string, string]>> {
  const ps = await warren(['ps', '--label', label, ...(all ? ['--all'] : [])], { env })
  assert.is(ps.status, 0, ps.stderr)
  return ps.stdout.trim().split('\n').slice(1).filter((l) => l !== '').map((l) => l.split(/\s+/).slice(0, 2) as [string, string])
}

test('warren create prints only the new sandbox\'s id, with its --ttl given as a duration and its labels', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const created = await warren(['create', '--ttl', '10m', '--label', 'made=by-create'], { env })
  assert.is(created.status, 0, created.stderr)
  assert.match(created.stdout, /^[a-z0-9]+\n$/)
  const id = created.stdout.trim()
  assert.equal(await listed(env, 'made=by-create'), [[id, 'ready']])
  const sdk = await connect(JSON.parse(readFileSync(env.WARREN_CONFIG!, 'utf8')) as { url: string, token: string })
  defer(() => sdk.close())
  const view = await (await sdk.attach(id)).info()
  assert.is(view.expiresAt - view.createdAt, 600_000, '--ttl 10m')
  assert.is((await warren(['kill', id], { env })).status, 0)
  assert.equal(await listed(env, 'made=by-create'), [[id, 'gone(killed)']])
  assert.equal(await listed(env, 'made=by-create', false), [], 'without --all, ps lists live sandboxes')
}))

test('warren ps shows a label\'s control characters escaped: a tenant\'s label cannot drive the terminal of whoever lists it', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const sdk = await connect(JSON.parse(readFileSync(env.WARREN_CONFIG!, 'utf8')) as { url: string, token: string })
  defer(() => sdk.close())
  const sb = await sdk.create({ labels: { term: 'a\u001b]0;owned\u0007\u001b[2Jb', row: 'x\ny' } })
  const ps = await warren(['ps'], { env })
  assert.is(ps.status, 0, ps.stderr)
  assert.not.match(ps.stdout, /[\u0000-\u0009\u000b-\u001f\u007f]/, 'no control character but the line ends')
  const line = ps.stdout.split('\n').find((l) => l.startsWith(sb.id))
  assert.ok(line !== undefined, ps.stdout)
  assert.match(line, /term=a\\x1b\]0;owned\\x07\\x1b\[2Jb/)
  assert.match(line, /row=x\\ny/)
}))

test('warren run gives the function backend its stdin up front, and refuses more than it can carry, naming stdin', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const echoed = await warren(['run', '--', 'js', 'console.log(stdin.toUpperCase())'], { env, input: 'hi from stdin\n' })
  assert.is(echoed.status, 0, echoed.stderr)
  assert.is(echoed.stdout, 'HI FROM STDIN\n\n')
  const none = await warren(['run', '--no-stdin', '--', 'js', 'console.log(JSON.stringify(stdin))'], { env, input: 'ignored' })
  assert.is(none.stdout, '""\n')
  const big = await warren(['run', '--label', 'big=stdin', '--', 'js', 'console.log(stdin.length)'], { env, input: Buffer.alloc(600 * 1024, 'x') })
  assert.is(big.status, 1)
  assert.match(big.stderr, /WARREN_ERR_INVALID_ARGUMENT: stdin holds more than 524288 bytes/)
  assert.equal(await listed(env, 'big=stdin'), [], 'no sandbox was made for a refused stdin')
}))

;(noContainers === undefined ? test : test.skip)('warren run streams its stdin to a container command: echo hi | warren run -- cat, and 8 MB byte-exact', timed(120_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const hi = await warren(['run', '--backend', 'container', '--', 'cat'], { env, input: 'hi\n' })
  assert.is(hi.status, 0, hi.stderr)
  assert.is(hi.stdout, 'hi\n')
  const bytes = randomBytes(8 * 1024 * 1024)
  const sum = await warren(['run', '--backend', 'container', '--', 'sha256sum'], { env, input: bytes, timeoutMs: 90_000 })
  assert.is(sum.status, 0, sum.stderr)
  assert.is(sum.stdout, `${createHash('sha256').update(bytes).digest('hex')}  -\n`)
}))

test('Ctrl-C on warren run kills its sandbox before it exits, with code 130', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  // A command that runs until killed: sleep in a container, else a busy loop in the function backend's js.
  const cmd = noContainers === undefined ? ['--backend', 'container', '--', 'sh', '-c', 'echo started; sleep 600'] : ['--', 'js', 'console.log("started"); while (true) {}']
  const run = spawn(process.execPath, [cli, 'run', '--label', 'ctrl=c', ...cmd], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  defer(async () => { if (run.exitCode === null) { run.kill('SIGKILL'); await exited(run) } })
  let out = ''
  let err = ''
  run.stderr.on('data', (b: Buffer) => { err += b.toString() })
  run.stdout.on('data', (b: Buffer) => { out += b.toString() })
  await waitFor(() => out.includes('started'), 30_000, `the command of warren run to start (${err})`)
  assert.equal((await listed(env, 'ctrl=c')).map(([, state]) => state), ['ready'])
  run.kill('SIGINT')
  const end = await exited(run)
  assert.is(end.status, 130, err)
  assert.not.match(err, stack)
  const after = await listed(env, 'ctrl=c')
  assert.is(after.length, 1)
  assert.is(after[0]![1], 'gone(killed)', `warren ps after Ctrl-C: ${JSON.stringify(after)} ${out}`)
}))

test('a reader that goes away ends a command quietly: warren ps into a closed pipe, and warren run, which kills its sandbox first', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  for (let i = 0; i < 3; i++) assert.is((await warren(['create', '--label', 'pipe=ps'], { env })).status, 0)
  for (const args of [['ps'], ['run', '--label', 'pipe=run', '--', 'js', 'for (let i = 0; i < 1e9; i++) console.log("y".repeat(1000))']]) {
    // The read end is closed before warren writes anything, so its first write meets EPIPE.
    const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    defer(async () => { if (child.exitCode === null) { child.kill('SIGKILL'); await exited(child) } })
    child.stdout.destroy()
    let err = ''
    child.stderr.on('data', (b: Buffer) => { err += b.toString() })
    const end = await exited(child)
    assert.is(end.status, 0, `warren ${args[0]}: ${err}`)
    assert.is(err, '', 'nothing on stderr')
  }
  assert.equal((await listed(env, 'pipe=run')).map(([, state]) => state), ['gone(killed)'])
}))

test('warren exec passes its stdin on, up front to a function sandbox', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const id = (await warren(['create'], { env })).stdout.trim()
  const echoed = await warren(['exec', id, '--', 'js', 'console.log(stdin.toUpperCase())'], { env, input: 'hi from stdin\n' })
  assert.is(echoed.status, 0, echoed.stderr)
  assert.is(echoed.stdout, 'HI FROM STDIN\n\n')
  const none = await warren(['exec', '--no-stdin', id, '--', 'js', 'console.log(JSON.stringify(stdin))'], { env, input: 'ignored' })
  assert.is(none.stdout, '""\n')
}))

;(noContainers === undefined ? test : test.skip)('warren exec streams stdin to a container command, and a reader that goes away or Ctrl-C kills the command, not the sandbox', timed(120_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const created = await warren(['create', '--backend', 'container', '--label', 'exec=stop'], { env })
  assert.is(created.status, 0, created.stderr)
  const id = created.stdout.trim()
  const hi = await warren(['exec', id, '--', 'cat'], { env, input: 'hi\n' })
  assert.is(hi.status, 0, hi.stderr)
  assert.is(hi.stdout, 'hi\n')
  /** Whether the process whose PID the command wrote to `file` still runs. */
  const alive = async (file: string): Promise<string> => (await warren(['exec', '--no-stdin', id, '--', 'sh', '-c', `kill -0 $(cat ${file}) 2>/dev/null && echo alive || echo gone`], { env })).stdout.trim()
  const stops: Array<{ name: string, cmd: string, stop: (child: ChildProcess) => void, status: number }> = [
    // `yes | head -1`: the reader closes once it has its line.
    { name: 'reader gone', cmd: 'echo $$ > /tmp/yes.pid; exec yes', stop: (child) => child.stdout!.destroy(), status: 0 },
    { name: 'Ctrl-C', cmd: 'echo $$ > /tmp/sleep.pid; echo started; exec sleep 600', stop: (child) => child.kill('SIGINT'), status: 130 }
  ]
  for (const { name, cmd, stop, status } of stops) {
    const file = /\/tmp\/\w+\.pid/.exec(cmd)![0]
    const child = spawn(process.execPath, [cli, 'exec', '--no-stdin', id, '--', 'sh', '-c', cmd], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    defer(async () => { if (child.exitCode === null) { child.kill('SIGKILL'); await exited(child) } })
    let err = ''
    child.stderr!.on('data', (b: Buffer) => { err += b.toString() })
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()))
    assert.is(await alive(file), 'alive', `${name}: the command runs`)
    stop(child)
    const end = await exited(child)
    assert.is(end.status, status, `${name}: ${err}`)
    assert.not.match(err, stack)
    await waitFor(async () => await alive(file) === 'gone', 30_000, `${name}: the command to be killed`)
  }
  assert.equal((await listed(env, 'exec=stop')).map(([, state]) => state), ['ready'], 'the sandbox stays')
}))

test('warren create refuses a limit or --env that is not one, naming the flag, and the cluster its bounds, naming the limit', timed(60_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const cases: Array<[string[], RegExp]> = [
    [['--cpus', 'two'], /WARREN_ERR_INVALID_ARGUMENT: --cpus must be a number, not "two"/],
    [['--pids', ''], /WARREN_ERR_INVALID_ARGUMENT: --pids must be a whole number/],
    [['--pids', '1.5'], /WARREN_ERR_INVALID_ARGUMENT: --pids must be a whole number, not "1.5"/],
    [['--memory', '2XB'], /WARREN_ERR_INVALID_ARGUMENT: --memory: sizes look like 512 \(MiB\), 512MiB or 2GiB, not 2XB/],
    [['--env', 'NOVALUE'], /WARREN_ERR_INVALID_ARGUMENT: --env takes NAME=value, got NOVALUE/],
    [['--backend', 'container', '--memory', '2048GiB'], /WARREN_ERR_BAD_SPEC: spec\.limits\.memoryMiB must be a whole number/],
    [['--backend', 'container', '--cpus', '0.001'], /WARREN_ERR_BAD_SPEC: spec\.limits\.cpus must be a number/],
    [['--egress', 'pypi.org'], /WARREN_ERR_BAD_SPEC: spec\.network\.egress is offered by the container and microvm backends only/]
  ]
  for (const [flags, refusal] of cases) {
    const r = await warren(['create', '--label', 'refused=yes', ...flags], { env })
    assert.is(r.status, 1, flags.join(' '))
    assert.match(r.stderr, refusal)
    assert.not.match(r.stderr, stack)
  }
  assert.equal(await listed(env, 'refused=yes'), [], 'no sandbox made')
}))

;(noContainers === undefined ? test : test.skip)('warren create --disk --pids --env reach the container: its writable layer, its process limit, its commands\' environment', timed(120_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const created = await warren(['create', '--backend', 'container', '--cpus', '0.5', '--memory', '256MiB', '--disk', '64', '--pids', '40', '--env', 'GREETING=hi there', '--env', 'EMPTY='], { env })
  assert.is(created.status, 0, created.stderr)
  const id = created.stdout.trim()
  const df = await warren(['exec', id, '--', 'sh', '-c', 'df -m / | tail -1'], { env })
  assert.match(df.stdout, /^overlay\s+64\s/, df.stdout)
  const said = await warren(['exec', id, '--', 'sh', '-c', 'echo "$GREETING|${EMPTY-unset}"'], { env })
  assert.is(said.stdout, 'hi there|\n')
  // 60 sleeps against a limit of 40: some forks fail, and the shell says so.
  const forks = await warren(['exec', id, '--', 'sh', '-c', 'for i in $(seq 60); do sleep 30 & done 2>&1; kill $(jobs -p) 2>/dev/null; true'], { env })
  assert.match(forks.stdout + forks.stderr, /can't fork|Resource temporarily unavailable/, forks.stdout + forks.stderr)
}))

test('warren up on a busy port names the address and port, without a stack, and exits non-zero', timed(60_000, async (defer) => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const port = (server.address() as { port: number }).port
  const { env, dir } = await warrenUp(defer)
  const up = await warren(['up', '--port', String(port), '--data-dir', `${dir}/second`], { env })
  assert.is(up.status, 1)
  assert.is(up.stderr, `warren: WARREN_ERR_INVALID_ARGUMENT: cannot listen on 127.0.0.1 port ${port}: the address is in use (EADDRINUSE); choose another with --port\n`)
}))

test.run()
