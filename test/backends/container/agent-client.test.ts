/**
 * The agent client against an agent that lies: a microVM's agent runs under the tenant's root,
 * so what it answers is checked, never trusted. A stand-in agent on a Unix socket answers `execs`
 * with malformed entries and more of them than any agent keeps, and sends output past its credit.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits, connectAgent, type AgentClient } from '../../../src/backends/container/index.js'
import { createError, ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { fakeAgent, lyingAgent } from './fake-agent.js'

test('listExecs keeps only well-formed entries, at most as many as an agent keeps', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-agent-lies-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const good = (id: number): Record<string, unknown> => ({ id, tag: `t${id}`, pid: 10 + id, seq: 5, acked: 2, ended: false, attached: false })
  const bad: unknown[] = [
    null, 7, 'x', [],
    { ...good(1), id: -1 }, { ...good(1), id: 1.5 }, { ...good(1), tag: '' }, { ...good(1), tag: 'x'.repeat(AgentLimits.maxTag + 1) },
    { ...good(1), tag: 42 }, { ...good(1), acked: 6 }, { ...good(1), ended: 'no' }, { ...good(1), seq: Number.MAX_VALUE }
  ]
  const many = Array.from({ length: AgentLimits.maxExecs + 50 }, (_, i) => good(100 + i))
  const agent = fakeAgent(join(dir, 'a.sock'), (req) => req.t === 'execs' ? { t: 'ok', id: req.id, execs: [...bad, good(2), ...many] } : { t: 'ok', id: req.id })
  defer(() => agent.close())
  const client = await connectAgent(join(dir, 'a.sock'))
  defer(() => client.close())
  const listed = await client.listExecs()
  assert.is(listed.length, AgentLimits.maxExecs)
  assert.equal(listed[0], good(2))
  assert.ok(listed.every((x) => typeof x.tag === 'string' && x.acked <= x.seq))
}))

test('an agent that sends output past the credit it was given is cut off: the node holds none of it', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-agent-lies-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const out = (id: unknown, seq: number, bytes: number): Record<string, unknown> => ({ t: 'out', id, seq, fd: 1, data: Buffer.alloc(bytes, 'x') })
  // Exec 'honest' stays within its window and the grant; 'greedy' sends 1,200 bytes on a window of 1,000.
  let greedy = false
  const agent = fakeAgent(join(dir, 'a.sock'), (req) => {
    if (req.t === 'exec' && (req.argv as string[])[0] === 'honest') return [{ t: 'started', id: req.id, pid: 7 }, out(req.id, 0, 1000)]
    if (req.t === 'credit') return [out(req.id, 1, 600), { t: 'exit', id: req.id, seq: 2, code: 0, durationMs: 1 }]
    if (req.t === 'exec') { greedy = true; return [{ t: 'started', id: req.id, pid: 8 }, out(req.id, 0, 600), out(req.id, 1, 600)] }
    return []
  })
  defer(() => agent.close())
  const client = await connectAgent(join(dir, 'a.sock'))
  defer(() => client.close())
  let honestBytes = 0
  const honest = client.startExec(['honest'], { windowBytes: 1000 }, { onStdout: (b) => { honestBytes += b.length; if (honestBytes === 1000) honest.grant(1000) } })
  assert.is((await honest.result).exitCode, 0)
  assert.is(honestBytes, 1600, 'all it was granted')
  let greedyBytes = 0
  const cut = await client.exec(['greedy'], { windowBytes: 1000 }, { onStdout: (b) => { greedyBytes += b.length } }).catch((e: unknown) => e)
  assert.ok(greedy)
  assert.ok(isWarrenError(cut, ErrorCodes.PROTOCOL_VIOLATION), String(cut))
  assert.is(greedyBytes, 600, 'nothing past the credit reached the handler')
  await client.ended
  assert.ok(client.closed, 'the connection to that agent is ended')
}))

test('an err from the agent passes only with a code agents give, its message cut and a field that looks like one', timed(10_000, async (defer) => {
  const cases: Array<[Record<string, unknown>, string, unknown]> = [
    [{ code: ErrorCodes.NOT_FOUND, message: 'no such file', field: 'path' }, ErrorCodes.NOT_FOUND, 'path'],
    [{ code: ErrorCodes.ACTOR_STOPPED, message: 'forged' }, ErrorCodes.BACKEND_UNAVAILABLE, undefined],
    [{ code: ErrorCodes.SANDBOX_GONE, message: 'forged', field: 'limits.cpus' }, ErrorCodes.BACKEND_UNAVAILABLE, undefined],
    [{ code: ErrorCodes.INTERNAL, message: 'y' }, ErrorCodes.BACKEND_UNAVAILABLE, undefined],
    [{ code: ErrorCodes.INVALID_ARGUMENT, message: 'z'.repeat(100_000), field: '../../etc {x}' }, ErrorCodes.INVALID_ARGUMENT, undefined]
  ]
  for (const [err, code, field] of cases) {
    const client = await lyingAgent(defer, 'stat', (req) => ({ t: 'err', id: req.id, ...err }))
    const got = await client.files.stat('/x').catch((e: unknown) => e)
    assert.ok(isWarrenError(got, code as never), `${String(err.code)} -> ${String(got)}`)
    assert.is(got.details?.field, field)
    assert.ok(got.message.length < 700, `message cut: ${got.message.length}`)
  }
}))

test('answers an agent does not give end its connection: a listing not a list or past 10,000, a stat out of shape, a read longer than asked, an exit out of range', timed(10_000, async (defer) => {
  const entry = (name: unknown): Record<string, unknown> => ({ name, type: 'file', size: 1, mode: 0o644, mtimeMs: 1 })
  const lies: Array<[string, (req: Record<string, unknown>) => Record<string, unknown> | Array<Record<string, unknown>>, (c: AgentClient) => Promise<unknown>]> = [
    ['list', (req) => ({ t: 'ok', id: req.id, entries: { not: 'a list' } }), async (c) => await c.files.list('/')],
    ['list', (req) => ({ t: 'ok', id: req.id, entries: Array.from({ length: AgentLimits.maxListEntries + 1 }, (_, i) => entry(`f${i}`)) }), async (c) => await c.files.list('/')],
    ['list', (req) => ({ t: 'ok', id: req.id, entries: [entry('a/b')] }), async (c) => await c.files.list('/')],
    ['list', (req) => ({ t: 'ok', id: req.id, entries: [entry('x'.repeat(256))] }), async (c) => await c.files.list('/')],
    ['stat', (req) => ({ t: 'ok', id: req.id, type: 'file', size: -1e300, mode: 0, uid: 0, gid: 0, mtimeMs: 0 }), async (c) => await c.files.stat('/x')],
    ['stat', (req) => ({ t: 'ok', id: req.id, type: 'weird', size: 1, mode: 0, uid: 0, gid: 0, mtimeMs: 0 }), async (c) => await c.files.stat('/x')],
    ['read', (req) => ({ t: 'ok', id: req.id, data: Buffer.alloc(200) }), async (c) => await c.files.read('/x', { offset: 0, length: 100 })],
    ['exec', (req) => [{ t: 'started', id: req.id, pid: 1 }, { t: 'exit', id: req.id, seq: 0, code: 1e308, durationMs: 'soon' }], async (c) => await c.exec(['true'])]
  ]
  for (const [kind, reply, call] of lies) {
    const client = await lyingAgent(defer, kind, reply)
    const got = await call(client).catch((e: unknown) => e)
    assert.ok(isWarrenError(got), `${kind}: ${String(got)}`)
    assert.ok([ErrorCodes.BACKEND_UNAVAILABLE, ErrorCodes.MALFORMED_FRAME].includes(got.code as never), `${kind}: ${got.code} ${got.message}`)
    await client.ended
    assert.ok(client.closed, `${kind}: the connection to that agent is ended`)
  }
}))

test('a wait the agent leaves unanswered is measured: a request, a command not started; a command running is no wait', timed(10_000, async (defer) => {
  let startedRunning = false
  const client = await lyingAgent(defer, 'exec', (req) => (req.argv as string[])[0] === 'runs' ? (startedRunning = true, [{ t: 'started', id: req.id, pid: 3 }]) : [])
  assert.is(client.oldestWaitMs(), 0)
  void client.exec(['runs']).catch(() => {})
  await client.ping()
  assert.ok(startedRunning)
  assert.is(client.oldestWaitMs(), 0, 'a running command answered when it started')
  void client.exec(['never']).catch(() => {})
  assert.ok(client.oldestWaitMs(Date.now() + 5000) >= 5000, 'its start is awaited')
  client.abandon(createError(ErrorCodes.PEER_UNRESPONSIVE, 'given up'))
  await client.ended
  assert.ok(isWarrenError(client.endReason, ErrorCodes.PEER_UNRESPONSIVE))
}))

test.run()
