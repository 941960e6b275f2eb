import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { encodeValue, NodeTrajectories, parseSandboxSpec, TrajectoryDefaults, TrajectoryStore, type ShipBatch, type Step } from '../../../src/cluster/index.js'
import { openState } from '../../../src/state/index.js'
import { timed, waitFor } from '../../support/index.js'

const spec = parseSandboxSpec({ backend: 'container', labels: { a: 'b' } })
const text = (s: string): Uint8Array => new TextEncoder().encode(s)

function store (defer: (fn: () => unknown) => void): TrajectoryStore {
  const state = openState(undefined)
  defer(() => state.close())
  return new TrajectoryStore(state.db)
}

function tempDir (defer: (fn: () => unknown) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tl-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Every step stored for a sandbox, in order. */
function stored (s: TrajectoryStore, id: string): Step[] {
  const out: Step[] = []
  for (let from = 0; ;) {
    const page = s.read('t', id, from)
    if (page.steps.length === 0) return out
    out.push(...page.steps)
    from = page.nextSeq
  }
}

test('a sandbox\'s steps go from its recorder through the log to the store; once ended and acknowledged the log is removed', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  const s = store(defer)
  const batches: ShipBatch[] = []
  const nt = new NodeTrajectories({ nodeId: 'n1', dir, send: async (b) => { batches.push(b); return s.append(b) } })
  defer(() => nt.close())
  nt.linkUp()
  const rec = nt.open({ sandboxId: 'sb1', tenant: 't', spec, createdAt: 1000, durable: true })
  const e = rec.exec('e1', ['sh', '-c', 'cat'], { env: { A: '1' }, cwd: '/tmp', stdin: text('up front ') })
  e.stdin(text('and later'))
  e.output('stdout', text('out'))
  e.output('stderr', text('err'))
  e.end({ exitCode: 3, durationMs: 5, truncated: false })
  rec.mkdir('/d', 0o750, true)
  const content = rec.bytes()
  content.write(text('file body'))
  rec.write('/d/f', 0o644, content)
  rec.rename('/d/f', '/d/g')
  rec.remove('/d', true)
  rec.egress({ host: 'pypi.org', port: 443, allowed: true, at: 2000 })
  await rec.flush(5000)
  const steps = stored(s, 'sb1')
  assert.equal(steps.map((x) => [x.seq, x.kind]), [[0, 'exec'], [1, 'mkdir'], [2, 'write'], [3, 'rename'], [4, 'remove'], [5, 'egress']])
  const exec = steps[0] as Extract<Step, { kind: 'exec' }>
  assert.equal([exec.argv, exec.env, exec.cwd, exec.exitCode, exec.durationMs], [['sh', '-c', 'cat'], { A: '1' }, '/tmp', 3, 5])
  assert.is(new TextDecoder().decode(exec.stdin!.data), 'up front and later')
  assert.is(new TextDecoder().decode(exec.stdout!.data), 'out')
  assert.is(new TextDecoder().decode(exec.stderr!.data), 'err')
  const write = steps[2] as Extract<Step, { kind: 'write' }>
  assert.equal([write.path, write.mode, new TextDecoder().decode(write.content.data)], ['/d/f', 0o644, 'file body'])
  assert.equal(steps[5], { seq: 5, at: 2000, kind: 'egress', host: 'pypi.org', port: 443, allowed: true })
  const page = s.read('t', 'sb1', 0)
  assert.equal([page.header?.sandboxId, page.header?.tenant, page.header?.node, page.header?.createdAt, page.header?.layers], ['sb1', 't', 'n1', 1000, ['busybox']])
  assert.is(page.complete, false)
  assert.ok(existsSync(join(dir, 'sb1.log')))
  await rec.close()
  assert.is(s.read('t', 'sb1', 0).complete, true)
  await waitFor(() => !existsSync(join(dir, 'sb1.log')), 5000, 'the log removed')
  // A sandbox that does not outlive the agent (a function) keeps its log in memory: no file.
  const brief = nt.open({ sandboxId: 'sbf', tenant: 't', spec, createdAt: 1 })
  brief.exec('e', ['js', '1'], {}).end({ exitCode: 0, durationMs: 1, truncated: false })
  assert.not.ok(existsSync(join(dir, 'sbf.log')))
  await brief.close()
  assert.is(s.read('t', 'sbf', 0).complete, true)
  assert.ok(batches.every((b) => b.nodeId === 'n1'))
}))

test('after a crash of the agent: a re-adopted sandbox goes on numbering, its unfinished command is lost, others end; nothing acknowledged is sent twice, nothing is missing', timed(10_000, async (defer) => {
  const dir = tempDir(defer)
  const s = store(defer)
  // The first agent's control plane never answers: everything stays in the logs.
  const first = new NodeTrajectories({ nodeId: 'n1', dir, send: async () => { throw new Error('unreachable') } })
  const a = first.open({ sandboxId: 'sba', tenant: 't', spec, createdAt: 1, durable: true })
  const done = a.exec('e1', ['true'], {})
  done.end({ exitCode: 0, durationMs: 1, truncated: false })
  a.exec('e2', ['sleep', '100'], {}).output('stdout', text('partial'))
  const b = first.open({ sandboxId: 'sbb', tenant: 't', spec, createdAt: 2, durable: true })
  b.exec('e3', ['sleep', '100'], {})
  await a.flush(5000) // the end's record is written once its bytes are final; the link is down, so nothing waits for it more
  first.close()
  // A record half written when the process died.
  appendFileSync(join(dir, 'sbb.log'), Buffer.from([0, 0, 1, 0, 1, 2]))

  const batches: ShipBatch[] = []
  const second = new NodeTrajectories({ nodeId: 'n1', dir, send: async (batch) => { batches.push(batch); return s.append(batch) } })
  defer(() => second.close())
  const again = second.open({ sandboxId: 'sba', tenant: 't', spec, createdAt: 1, durable: true })
  assert.is(again.seq, 2, 'numbering goes on after the steps the log holds')
  again.exec('e4', ['echo'], {}).end({ exitCode: 0, durationMs: 1, truncated: false })
  second.endUnclaimed()
  second.linkUp()
  await again.flush(5000)
  await waitFor(() => s.read('t', 'sbb', 0).complete, 5000, 'the unclaimed sandbox ended')
  const steps = stored(s, 'sba')
  assert.equal(steps.map((x) => [x.seq, x.kind === 'exec' ? x.execId : x.kind]), [[0, 'e1'], [1, 'e2'], [2, 'e4']])
  const lost = steps[1] as Extract<Step, { kind: 'exec' }>
  assert.is(lost.reason, 'lost')
  assert.ok(lost.endedAt !== undefined)
  const other = stored(s, 'sbb')
  assert.equal(other.map((x) => [x.seq, x.kind === 'exec' ? x.reason : '']), [[0, 'lost']])
  // Ended and acknowledged, the logs go: a third start has nothing to send again.
  await again.close()
  await waitFor(() => readdirSync(dir).filter((n) => n.endsWith('.log')).length === 0, 5000, 'every log removed')
  second.close()
  const sent = batches.length
  const third = new NodeTrajectories({ nodeId: 'n1', dir, send: async (batch) => { batches.push(batch); return s.append(batch) } })
  defer(() => third.close())
  third.endUnclaimed()
  third.linkUp()
  assert.is(batches.length, sent, 'nothing more was sent')
}))

test('a link that drops loses nothing: what was not acknowledged goes again', timed(10_000, async (defer) => {
  const s = store(defer)
  let fail = true
  const nt = new NodeTrajectories({ nodeId: 'n1', send: async (b) => { if (fail) throw new Error('dropped'); return s.append(b) }, ship: { retryMs: 10 } })
  defer(() => nt.close())
  nt.linkUp()
  const rec = nt.open({ sandboxId: 'sbm', tenant: 't', spec, createdAt: 1 })
  for (let i = 0; i < 50; i++) rec.exec(`e${i}`, ['true'], {}).end({ exitCode: i % 3, durationMs: 0, truncated: false })
  await new Promise((resolve) => setTimeout(resolve, 100))
  fail = false
  nt.linkUp()
  await rec.close()
  const steps = stored(s, 'sbm')
  assert.equal(steps.map((x) => x.seq), Array.from({ length: 50 }, (_, i) => i))
  assert.ok(steps.every((x) => x.kind === 'exec' && x.exitCode !== undefined))
  assert.is(s.read('t', 'sbm', 0).complete, true)
}))

test('a command whose argv alone would not fit a page is cut to fit, and still ships', timed(10_000, async (defer) => {
  const s = store(defer)
  const nt = new NodeTrajectories({ nodeId: 'n1', send: async (b) => s.append(b) })
  defer(() => nt.close())
  nt.linkUp()
  const rec = nt.open({ sandboxId: 'sbx', tenant: 't', spec, createdAt: 1 })
  rec.exec('e', ['x'.repeat(500_000), 'y'.repeat(500_000)], { env: { BIG: 'z'.repeat(100_000), SMALL: 'ok' } }).end({ exitCode: 0, durationMs: 1, truncated: false })
  await rec.close()
  const [step] = s.read('t', 'sbx', 0).steps as Array<Extract<Step, { kind: 'exec' }>>
  assert.ok(step!.argv[0]!.length < 500_000 && step!.argv[0]!.startsWith('xxx'))
  assert.is(step!.env!.SMALL, 'ok')
  assert.ok(encodeValue(step).length <= TrajectoryDefaults.maxStepBytes)
  assert.is(s.read('t', 'sbx', 0).complete, true)
}))

test('a sandbox made again under its id goes on at the seq it is given, without a new header', timed(10_000, async (defer) => {
  const s = store(defer)
  const nt = new NodeTrajectories({ nodeId: 'n1', send: async (b) => s.append(b) })
  defer(() => nt.close())
  nt.linkUp()
  const one = nt.open({ sandboxId: 'sbh', tenant: 't', spec, createdAt: 1 })
  one.pause()
  await one.close()
  assert.is(s.read('t', 'sbh', 0).complete, true)
  assert.is(s.nextSeq('sbh'), 1)
  const two = nt.open({ sandboxId: 'sbh', tenant: 't', spec, createdAt: 5, nextSeq: s.nextSeq('sbh') })
  await two.flush(5000)
  assert.is(s.read('t', 'sbh', 0).complete, false, 'going on again')
  two.resume()
  two.snapshot('snap-0123456789abcdef', 'sha256:' + 'a'.repeat(64))
  await two.close()
  const page = s.read('t', 'sbh', 0)
  assert.equal(page.steps.map((x) => [x.seq, x.kind]), [[0, 'pause'], [1, 'resume'], [2, 'snapshot']])
  assert.is(page.header?.createdAt, 1, 'the first header stays')
  assert.is(page.complete, true)
}))

test.run()
