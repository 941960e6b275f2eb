import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, type Ref } from '../../src/actors/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { createBackoff, createDynamicSupervisor } from '../../src/supervisors/index.js'
import { timed, waitFor } from '../support/index.js'

class Echo extends Actor<string> {
  constructor (private readonly tag: string, private readonly started: string[]) { super() }
  preStart (): void { this.started.push(this.tag) }
  receive (m: string): unknown {
    if (m === 'crash') throw new Error('crash')
    return `${this.tag}:${m}`
  }
}

test('children start on demand, up to maxChildren; temporary ones are not restarted', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const started: string[] = []
  const sup = system.spawn(createDynamicSupervisor<string>({
    child: { start: (tag) => new Echo(tag, started), spawn: (tag) => ({ name: `sb-${tag}` }), restart: 'temporary' },
    maxChildren: 2
  }))
  const a = await sup.ask<Ref<string>>({ type: 'start-child', args: 'a' })
  await sup.ask({ type: 'start-child', args: 'b' })
  assert.is(a.address, 'local/sb-a')
  assert.is(await a.ask('hi'), 'a:hi')
  const err = await sup.ask({ type: 'start-child', args: 'c' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.NO_CAPACITY))
  a.tell('crash')
  await system.whenTerminated(a)
  await waitFor(async () => (await sup.ask<number>({ type: 'count' })) === 1, 2000, 'count drops to 1')
  assert.equal(started, ['a', 'b'])
}))

test('a child whose factory throws fails its start-child only', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const sup = system.spawn(createDynamicSupervisor<string>({
    child: { start: (tag) => { if (tag === 'bad') throw new Error('bad spec'); return new Echo(tag, []) }, restart: 'temporary' }
  }))
  const err = await sup.ask({ type: 'start-child', args: 'bad' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.ACTOR_FAILED))
  const ok = await sup.ask<Ref<string>>({ type: 'start-child', args: 'good' })
  assert.is(await ok.ask('x'), 'good:x')
}))

test('permanent children restart with exponential backoff', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const started: string[] = []
  const sup = system.spawn(createDynamicSupervisor<string>({
    child: { start: (tag) => new Echo(tag, started), restart: 'permanent', backoff: { minMs: 5, maxMs: 20, jitter: 0 } }
  }))
  let ref = await sup.ask<Ref<string>>({ type: 'start-child', args: 'p' })
  for (let i = 0; i < 3; i++) {
    ref.tell('crash')
    await system.whenTerminated(ref)
    await waitFor(async () => {
      const kids = await sup.ask<Ref[]>({ type: 'which-children' })
      return kids.length === 1 && kids[0] !== ref ? kids[0] : undefined
    }, 2000, 'restart').then((r) => { ref = r as Ref<string> })
  }
  assert.equal(started, ['p', 'p', 'p', 'p'])
}))

test('backoff: doubles from min to max, jitter stays within bounds, long runs reset it', () => {
  const b = createBackoff({ minMs: 10, maxMs: 100, jitter: 0, resetAfterMs: 1000 })
  assert.equal([b.next(), b.next(), b.next(), b.next(), b.next()], [10, 20, 40, 80, 100])
  b.ranFor(999)
  assert.is(b.next(), 100)
  b.ranFor(1000)
  assert.is(b.next(), 10)
  const j = createBackoff({ minMs: 100, maxMs: 1000, jitter: 0.5 })
  for (let i = 0; i < 100; i++) { const d = j.next(); assert.ok(d >= 0 && d <= 1000); j.reset() }
  const lo = createBackoff({ minMs: 100, jitter: 0.5 }, () => 0).next()
  const hi = createBackoff({ minMs: 100, jitter: 0.5 }, () => 0.999999).next()
  assert.is(lo, 50)
  assert.is(hi, 150)
  // The transport's reconnects grow by their own factor, and jitter never passes the ceiling.
  const f = createBackoff({ minMs: 100, maxMs: 1000, factor: 3, jitter: 0 })
  assert.equal([f.next(), f.next(), f.next(), f.next()], [100, 300, 900, 1000])
  assert.is(createBackoff({ minMs: 1000, maxMs: 1000, jitter: 0.5 }, () => 0.999999).next(), 1000)
})

test.run()
