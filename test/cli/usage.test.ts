import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { COMMANDS } from '../../src/cli/index.js'
import { RECORD_STATES } from '../../src/cluster/index.js'
import { timed } from '../support/index.js'
import { warren } from './support.js'

// No control plane here: everything below is answered before the CLI connects anywhere.
const noCluster = { ...process.env, WARREN_CONFIG: '/nonexistent/config.json', WARREN_URL: '', WARREN_TOKEN: '' }
const stack = /^\s+at /m

test('warren --help lists every command of the table; each command\'s --help, -h and warren help CMD list all its flags', timed(120_000, async () => {
  const all = await warren(['--help'], { env: noCluster })
  assert.is(all.status, 0, all.stderr)
  for (const c of COMMANDS) {
    assert.ok(all.stdout.includes(`  ${c.name}`), `warren --help lists ${c.name}`)
    assert.ok(all.stdout.includes(c.summary), `with its summary: ${c.summary}`)
    const own = await warren([...c.name.split(' '), '--help'], { env: noCluster })
    assert.is(own.status, 0, own.stderr)
    assert.ok(own.stdout.startsWith(`usage: warren ${c.name}`), own.stdout)
    for (const flag of Object.keys(c.flags)) assert.ok(own.stdout.includes(`--${flag}`), `warren ${c.name} --help lists --${flag}`)
    assert.ok(own.stdout.includes('-h, --help'))
    const viaHelp = await warren(['help', ...c.name.split(' ')], { env: noCluster })
    assert.is(viaHelp.stdout, own.stdout, `warren help ${c.name} prints what --help does`)
  }
  const group = await warren(['help', 'tenant'], { env: noCluster })
  assert.is(group.status, 0)
  assert.match(group.stdout, /usage: warren tenant ls[\s\S]*usage: warren tenant quotas \[flags\]/)
  const short = await warren(['ps', '-h'], { env: noCluster })
  assert.is(short.status, 0)
  assert.match(short.stdout, /--state STATE/)
}))

test('an unknown flag, command or subcommand is refused naming it, with exit code 2 and no stack', timed(60_000, async () => {
  const cases: Array<[string[], RegExp]> = [
    [['ps', '--bogus'], /INVALID_ARGUMENT: warren ps: unknown flag --bogus/],
    [['run', '--imagee', 'x', '--', 'true'], /unknown flag --imagee/],
    [['image', 'build', '-q'], /warren image build: unknown flag -q/],
    [['image', 'ls', '--no-tag'], /warren image ls: unknown flag --no-tag/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['token'], /warren token needs a subcommand: one of create/],
    [['tenant', 'rm'], /warren tenant has no subcommand "rm": one of ls, quotas/],
    [['sim', 'plna'], /warren sim has no subcommand "plna": one of plan, calibrate/],
    [['help', 'nosuch'], /unknown command "nosuch"/],
    [['run', '--ttl'], /--ttl needs a value \(--ttl DURATION\)/],
    [['up', '--no-local-node=yes'], /--no-local-node takes no value/],
    [['exec', 'abc'], /warren exec needs a command after --/],
    [['log'], /usage: warren log ID/],
    [['nodes', 'extra'], /warren nodes takes no arguments, got "extra"/],
    [['ps', '--', 'ls'], /warren ps takes no command after --/]
  ]
  for (const [args, message] of cases) {
    const r = await warren(args, { env: noCluster })
    assert.is(r.status, 2, `warren ${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, message)
    assert.match(r.stderr, /^warren: WARREN_ERR_INVALID_ARGUMENT: /)
    assert.not.match(r.stderr, stack)
    assert.is(r.stdout, '')
  }
}))

test('a bad flag value is refused naming the flag before anything is asked of a cluster: --state lists the states, --ttl the forms', timed(30_000, async () => {
  const state = await warren(['ps', '--state', 'bogus'], { env: noCluster })
  assert.is(state.status, 1)
  assert.ok(state.stderr.includes(`--state must be one of ${RECORD_STATES.join(', ')}, not "bogus"`), state.stderr)
  assert.ok(RECORD_STATES.includes('hibernated'))
  const ttl = await warren(['create', '--ttl', 'forever'], { env: noCluster })
  assert.is(ttl.status, 1)
  assert.match(ttl.stderr, /--ttl: durations look like 24h, 90m or 30s, not forever/)
  const zero = await warren(['run', '--ttl', '0', '--', 'true'], { env: noCluster })
  assert.match(zero.stderr, /--ttl must be more than 0 ms/)
  const label = await warren(['create', '--label', 'novalue'], { env: noCluster })
  assert.match(label.stderr, /--label takes key=value, got novalue/)
  const seed = await warren(['create', '--seed', '3'], { env: noCluster })
  assert.match(seed.stderr, /--seed goes with --deterministic/)
  const seedText = await warren(['create', '--deterministic', '--seed', 'x'], { env: noCluster })
  assert.match(seedText.stderr, /--seed must be a whole number, not "x"/)
}))

test('a refused connection is named with its address and port, at once and without a stack', timed(30_000, async () => {
  const r = await warren(['ps'], { env: { ...noCluster, WARREN_URL: 'ws://127.0.0.1:1', WARREN_TOKEN: 'wrn_x' } })
  assert.is(r.status, 1)
  assert.match(r.stderr, /^warren: WARREN_ERR_CONNECTION_CLOSED: cannot reach the control plane at ws:\/\/127\.0\.0\.1:1 \(127\.0\.0\.1 port 1\): connection refused \(ECONNREFUSED\)\n$/)
  const bad = await warren(['ps'], { env: { ...noCluster, WARREN_URL: 'http://127.0.0.1:1', WARREN_TOKEN: 'wrn_x' } })
  assert.match(bad.stderr, /URL must be ws:\/\/HOST:PORT or wss:\/\/HOST:PORT, not http:\/\/127\.0\.0\.1:1/)
}))

test.run()
