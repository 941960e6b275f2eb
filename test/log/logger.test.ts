import { Writable } from 'node:stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem } from '../../src/actors/index.js'
import { createLogger, idsOfAddress, prettyByDefault, resolveLogLevel, watchSystem } from '../../src/log/index.js'
import { createSupervisor } from '../../src/supervisors/index.js'
import { isWarrenError } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'
import { captureLog } from '../support/log-capture.js'

const capture = captureLog

test('levels: below the level nothing is written; lines are JSON with an ISO time, the level by name and the message', () => {
  const out = capture()
  const log = createLogger({ level: 'warn', destination: out })
  log.info('not this')
  log.debug('nor this')
  log.warn({ node: 'n1' }, 'this')
  log.error('and this')
  const recs = out.records()
  assert.equal(recs.map((r) => r.msg), ['this', 'and this'])
  assert.is(recs[0]!.level, 'warn')
  assert.is(recs[0]!.node, 'n1')
  assert.ok(!Number.isNaN(Date.parse(recs[0]!.time)), recs[0]!.time)
  assert.match(recs[0]!.time, /^\d{4}-\d\d-\d\dT/)
  const silent = capture()
  createLogger({ level: 'silent', destination: silent }).error('nothing')
  assert.equal(silent.lines, [])
})

test('ids bound with child() travel on every line of the child, not of the parent', () => {
  const out = capture()
  const log = createLogger({ level: 'info', destination: out, bindings: { node: 'n1' } })
  const sb = log.child({ tenant: 't1', sandbox: 'abc' })
  sb.info({ exec: 'e1' }, 'exec started')
  log.info('plain')
  const [a, b] = out.records()
  assert.equal([a!.node, a!.tenant, a!.sandbox, a!.exec], ['n1', 't1', 'abc', 'e1'])
  assert.is(b!.node, 'n1')
  assert.is(b!.sandbox, undefined)
})

test('pretty only on a terminal: JSON to a pipe or a destination; pretty when asked, and then not JSON', timed(5000, async () => {
  assert.is(prettyByDefault(undefined, true), true)
  assert.is(prettyByDefault(undefined, false), false)
  assert.is(prettyByDefault({ write () {} }, true), false)
  const lines: string[] = []
  const out = new Writable({ write (chunk: Buffer, _enc, cb) { lines.push(chunk.toString()); cb() } })
  createLogger({ level: 'info', destination: out, pretty: true }).info({ sandbox: 'abc' }, 'hello there')
  await waitFor(() => lines.length > 0, 2000, 'the pretty line')
  const text = lines.join('')
  assert.match(text, /hello there/)
  assert.match(text, /sandbox: "abc"/)
  assert.throws(() => JSON.parse(text))
}))

test('the level: --log-level first, then WARREN_LOG_LEVEL, then the default; a wrong one is refused naming where it came from', () => {
  assert.is(resolveLogLevel('debug', 'info', { WARREN_LOG_LEVEL: 'error' }), 'debug')
  assert.is(resolveLogLevel(undefined, 'info', { WARREN_LOG_LEVEL: 'error' }), 'error')
  assert.is(resolveLogLevel(undefined, 'info', {}), 'info')
  assert.throws(() => resolveLogLevel('loud', 'info', {}), (e: unknown) => isWarrenError(e) && e.details?.field === 'log-level')
  assert.throws(() => resolveLogLevel(undefined, 'info', { WARREN_LOG_LEVEL: 'verbose' }), (e: unknown) => isWarrenError(e) && e.details?.field === 'WARREN_LOG_LEVEL')
})

test('ids of an address: a shard, a sandbox on its node, a node', () => {
  assert.equal(idsOfAddress('cp/shard-3'), { shard: 3 })
  assert.equal(idsOfAddress('node-a/sb-0123456789abcdef'), { node: 'node-a', sandbox: '0123456789abcdef' })
  assert.equal(idsOfAddress('node-a/agent'), { node: 'node-a' })
  assert.equal(idsOfAddress('cp/registry'), {})
})

class Crasher extends Actor<string> {
  receive (m: string): unknown {
    if (m === 'crash') throw new TypeError('a bug in the actor')
    return m
  }
}

test('an actor failure is logged once with its cause; its supervisor\'s restart once; a supervisor giving up once', timed(10_000, async (defer) => {
  const system = new ActorSystem({ name: 'cp' })
  const out = capture()
  const watch = watchSystem(system, createLogger({ level: 'debug', destination: out }))
  defer(() => system.shutdown(1000))
  defer(() => watch.close())
  const sup = system.spawn(createSupervisor({ intensity: { maxRestarts: 1, periodMs: 60_000 }, children: [{ id: 'shard-0', start: () => new Crasher(), spawn: { name: 'shard-0' } }] }), { name: 'placement' })
  system.lookup<string>('cp/shard-0')!.tell('crash')
  await waitFor(() => out.records().some((r) => r.msg === 'supervisor restarted a child'), 5000, 'the restart logged')
  const failed = out.records().filter((r) => r.msg === 'actor failed')
  assert.is(failed.length, 1)
  assert.is(failed[0]!.actor, 'cp/shard-0')
  assert.is(failed[0]!.shard, 0)
  assert.is(failed[0]!.level, 'error')
  assert.is(failed[0]!.err.type, 'TypeError')
  assert.is(failed[0]!.err.message, 'a bug in the actor')
  assert.match(failed[0]!.err.stack, /Crasher\.receive/)
  const restarts = out.records().filter((r) => r.msg === 'supervisor restarted a child')
  assert.is(restarts.length, 1)
  assert.equal([restarts[0]!.supervisor, restarts[0]!.child, restarts[0]!.shard], ['cp/placement', 'shard-0', 0])
  assert.match(restarts[0]!.cause, /failed: a bug in the actor/)
  // A second crash within the period is one too many: the supervisor gives up, logged once as that.
  await waitFor(() => system.lookup('cp/shard-0'), 2000, 'the restarted shard')
  system.lookup<string>('cp/shard-0')!.tell('crash')
  await waitFor(() => !system.isAlive(sup), 5000, 'the supervisor to give up')
  const recs = out.records()
  assert.is(recs.filter((r) => r.msg === 'actor failed').length, 2, 'each crash once')
  const gaveUp = recs.filter((r) => r.msg.startsWith('supervisor gave up'))
  assert.is(gaveUp.length, 1)
  assert.is(gaveUp[0]!.actor, 'cp/placement')
  assert.is(gaveUp[0]!.err.code, 'WARREN_ERR_SUPERVISOR_INTENSITY')
}))

test('dead letters: the first of a reason at once, then one summary a window however many come; content never logged', timed(10_000, async (defer) => {
  const system = new ActorSystem({ name: 'n1' })
  const out = capture()
  const watch = watchSystem(system, createLogger({ level: 'debug', destination: out }), 200)
  defer(() => system.shutdown(1000))
  defer(() => watch.close())
  const ref = system.spawn(() => new Crasher(), { name: 'sb-abc' })
  await system.stop(ref)
  for (let i = 0; i < 5000; i++) ref.tell({ type: 'stdin', data: 'secret-bytes' } as unknown as string)
  await waitFor(() => out.records().some((r) => r.count !== undefined), 3000, 'a summary')
  const recs = out.records().filter((r) => r.reason === 'stopped')
  assert.is(recs.length, 2, JSON.stringify(recs))
  assert.equal([recs[0]!.recipient, recs[0]!.node, recs[0]!.sandbox, recs[0]!.messageType], ['n1/sb-abc', 'n1', 'abc', 'stdin'])
  assert.is(recs[1]!.count, 4999)
  assert.not.match(out.lines.join(''), /secret-bytes/)
  // A quiet window ends the summaries: nothing more comes.
  await new Promise((resolve) => setTimeout(resolve, 500))
  assert.is(out.records().filter((r) => r.reason === 'stopped').length, 2)
}))

test.run()
