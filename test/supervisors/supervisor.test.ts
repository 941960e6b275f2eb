import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, isFailure, type ExitReason, type Ref } from '../../src/actors/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { createSupervisor, type ChildInfo, type ChildSpec, type Strategy } from '../../src/supervisors/index.js'
import { timed, waitFor } from '../support/index.js'

/** A child that logs its start and stop, crashes on 'crash' and stops normally on 'quit'. */
class Worker extends Actor<string> {
  constructor (private readonly id: string, private readonly log: string[]) { super() }
  preStart (): void { this.log.push(`start ${this.id}`) }
  receive (m: string): unknown {
    if (m === 'crash') throw new Error(`${this.id} crashed`)
    if (m === 'quit') { this.ctx.stop('normal'); return undefined }
    return this.id
  }

  postStop (reason: ExitReason): void { this.log.push(`stop ${this.id} ${isFailure(reason) ? 'failed' : reason}`) }
}

function worker (id: string, log: string[], extra: Partial<ChildSpec> = {}): ChildSpec {
  return { id, start: () => new Worker(id, log), ...extra }
}

async function children (sup: Ref): Promise<ChildInfo[]> {
  return await sup.ask({ type: 'which-children' })
}

async function refOf (sup: Ref, id: string): Promise<Ref<string>> {
  const info = (await children(sup)).find((c) => c.id === id)
  if (info?.ref === undefined) throw new Error(`child ${id} not running`)
  return info.ref as Ref<string>
}

function setUp (strategy: Strategy, log: string[], intensity = { maxRestarts: 10, periodMs: 5000 }): { system: ActorSystem, sup: Ref } {
  const system = new ActorSystem()
  const sup = system.spawn(createSupervisor({
    strategy,
    intensity,
    children: ['a', 'b', 'c'].map((id) => worker(id, log))
  }))
  return { system, sup }
}

test('children start in order and stop in reverse', timed(5000, async (defer) => {
  const log: string[] = []
  const { system, sup } = setUp('one_for_one', log)
  defer(() => system.shutdown(0))
  await children(sup)
  assert.equal(log, ['start a', 'start b', 'start c'])
  await system.stop(sup)
  assert.equal(log.slice(3), ['stop c shutdown', 'stop b shutdown', 'stop a shutdown'])
}))

test('one_for_one: only the crashed child restarts', timed(5000, async (defer) => {
  const log: string[] = []
  const { system, sup } = setUp('one_for_one', log)
  defer(() => system.shutdown(0))
  const b = await refOf(sup, 'b')
  b.tell('crash')
  await waitFor(async () => (await refOf(sup, 'b').catch(() => b)) !== b, 2000, 'b restarted')
  assert.equal(log.slice(3), ['stop b failed', 'start b'])
  assert.is(await (await refOf(sup, 'b')).ask('hi'), 'b')
}))

test('one_for_all: every child restarts, the others stopped newest first', timed(5000, async (defer) => {
  const log: string[] = []
  const { system, sup } = setUp('one_for_all', log)
  defer(() => system.shutdown(0))
  const b = await refOf(sup, 'b')
  b.tell('crash')
  await waitFor(() => log.length >= 9, 2000, 'all restarted')
  assert.equal(log.slice(3), ['stop b failed', 'stop c shutdown', 'stop a shutdown', 'start a', 'start b', 'start c'])
}))

test('rest_for_one: the crashed child and those after it restart', timed(5000, async (defer) => {
  const log: string[] = []
  const { system, sup } = setUp('rest_for_one', log)
  defer(() => system.shutdown(0))
  const b = await refOf(sup, 'b')
  b.tell('crash')
  await waitFor(() => log.length >= 7, 2000, 'b and c restarted')
  assert.equal(log.slice(3), ['stop b failed', 'stop c shutdown', 'start b', 'start c'])
  assert.is(await (await refOf(sup, 'a')).ask('x'), 'a')
}))

test('restart types: transient restarts only after a failure; temporary never', timed(5000, async (defer) => {
  const log: string[] = []
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const sup = system.spawn(createSupervisor({
    intensity: { maxRestarts: 10, periodMs: 5000 },
    children: [worker('t', log, { restart: 'transient' }), worker('tmp', log, { restart: 'temporary' })]
  }))
  const t = await refOf(sup, 't')
  t.tell('quit')
  await system.whenTerminated(t)
  assert.is((await children(sup)).find((c) => c.id === 't')?.ref, undefined, 'a normal exit is not restarted')
  const tmp = await refOf(sup, 'tmp')
  tmp.tell('crash')
  await system.whenTerminated(tmp)
  assert.not.ok((await children(sup)).some((c) => c.id === 'tmp'), 'a temporary child is forgotten')
  await sup.ask({ type: 'restart-child', id: 't' })
  const t2 = await refOf(sup, 't')
  t2.tell('crash')
  await waitFor(async () => (await refOf(sup, 't').catch(() => t2)) !== t2, 2000, 'transient restarted after failure')
}))

test('intensity exceeded: the supervisor stops its children and fails upward', timed(5000, async (defer) => {
  const log: string[] = []
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const top = system.spawn(createSupervisor({
    intensity: { maxRestarts: 100, periodMs: 5000 },
    children: [{
      id: 'inner',
      start: createSupervisor({ intensity: { maxRestarts: 1, periodMs: 60_000 }, children: [worker('a', log), worker('b', log)] }),
      shutdown: 'infinity'
    }]
  }))
  const inner = await refOf(top, 'inner')
  ;(await refOf(inner, 'a')).tell('crash') // restart 1: allowed
  await waitFor(() => log.filter((l) => l === 'start a').length === 2, 2000, 'first restart')
  ;(await refOf(inner, 'a')).tell('crash') // restart 2 in the window: too many
  const reason = await system.whenTerminated(inner)
  assert.ok(isFailure(reason) && isWarrenError(reason.error, ErrorCodes.SUPERVISOR_INTENSITY))
  assert.ok(log.includes('stop b shutdown'), 'siblings were stopped before failing')
  // The top supervisor restarted the inner one, which started its children afresh.
  await waitFor(async () => {
    const r = (await children(top))[0]?.ref
    return r !== undefined && r !== inner
  }, 2000, 'inner supervisor restarted')
  await waitFor(() => log.filter((l) => l === 'start a').length === 3, 2000, 'children started afresh')
}))

test('shutdown brutal_kill does not wait; a number bounds the wait', timed(5000, async (defer) => {
  const log: string[] = []
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  class Stubborn extends Actor<string> {
    receive (): unknown { return new Promise(() => {}) } // never finishes its message
    postStop (): void { log.push('stubborn postStop') }
  }
  const sup = system.spawn(createSupervisor({
    children: [
      { id: 's1', start: () => new Stubborn(), shutdown: 30 },
      { id: 's2', start: () => new Stubborn(), shutdown: 'brutal_kill' }
    ]
  }))
  for (const c of await children(sup)) c.ref!.tell('busy')
  await new Promise((resolve) => setTimeout(resolve, 10))
  assert.is(await system.stop(sup, 2000), 'shutdown')
  await waitFor(() => log.length === 2, 2000, 'both postStops ran')
}))

test.run()
