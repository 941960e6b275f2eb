import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, type Ref } from '../../src/actors/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'

/** Holds every message until `release` is told; records what it handled. */
class Gate extends Actor<string> {
  handled: string[] = []
  private open!: () => void
  private readonly gate = new Promise<void>((resolve) => { this.open = resolve })
  async receive (m: string): Promise<string> {
    if (m === 'release') { this.open(); return m }
    if (m === 'block') { await this.gate; return m }
    this.handled.push(m)
    return m
  }
}

function gateOf (system: ActorSystem, ref: Ref): Gate {
  return (system as unknown as { cellOf (r: Ref): { actor: Gate } }).cellOf(ref).actor
}

test('tell delivers messages in order and ask returns the reply', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown())
  const ref = system.spawn(() => new Gate())
  for (let i = 0; i < 100; i++) assert.ok(ref.tell(`m${i}`))
  assert.is(await ref.ask('last'), 'last')
  assert.equal(gateOf(system, ref).handled, [...Array.from({ length: 100 }, (_, i) => `m${i}`), 'last'])
}))

test('ask without a reply rejects with WARREN_ERR_ASK_TIMEOUT', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Gate())
  ref.tell('block')
  const err = await ref.ask('x', { timeoutMs: 50 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.ASK_TIMEOUT), String(err))
}))

test('overflow reject: a full mailbox refuses at once with a retry-after hint', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Gate(), { mailbox: { capacity: 2, overflow: 'reject' } })
  ref.tell('block')
  await new Promise((resolve) => setImmediate(resolve)) // 'block' is now being handled
  assert.ok(ref.tell('a'))
  assert.ok(ref.tell('b'))
  assert.is(ref.tell('c'), false)
  const err = await ref.ask('d').catch((e: unknown) => e) as WarrenError
  assert.ok(isWarrenError(err, ErrorCodes.OVERLOADED))
  assert.type(err.details?.retryAfterMs, 'number')
  assert.is(system.deadLetters.overloaded, 2)
  assert.is(ref.tell('release'), false) // refused too: the mailbox is still full
  gateOf(system, ref)['open']()
  await waitFor(() => gateOf(system, ref).handled.length === 2, 2000, 'a and b handled')
  assert.is(await ref.ask('e'), 'e')
  assert.equal(gateOf(system, ref).handled, ['a', 'b', 'e'])
}))

test('overflow drop-oldest: the oldest message makes room and is counted', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Gate(), { mailbox: { capacity: 2, overflow: 'drop-oldest' } })
  ref.tell('block')
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(ref.tell('a'))
  assert.ok(ref.tell('b'))
  assert.ok(ref.tell('c'))
  assert.is(system.deadLetters.dropped, 1)
  gateOf(system, ref)['open']()
  await waitFor(() => gateOf(system, ref).handled.length === 2, 2000, 'b and c handled')
  const done = await ref.ask('done')
  assert.is(done, 'done')
  assert.equal(gateOf(system, ref).handled, ['b', 'c', 'done'])
}))

test('overflow drop-newest: the new message is dropped and counted', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Gate(), { mailbox: { capacity: 2, overflow: 'drop-newest' } })
  ref.tell('block')
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(ref.tell('a'))
  assert.ok(ref.tell('b'))
  assert.is(ref.tell('c'), false)
  assert.is(system.deadLetters.dropped, 1)
  gateOf(system, ref)['open']()
  await waitFor(() => gateOf(system, ref).handled.length === 2, 2000, 'a and b handled')
  assert.is(await ref.ask('done'), 'done')
  assert.equal(gateOf(system, ref).handled, ['a', 'b', 'done'])
}))

test('messages to a stopped actor are dead letters; asks reject with ACTOR_STOPPED', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const letters: unknown[] = []
  system.on('deadLetter', (l) => letters.push(l))
  const ref = system.spawn(() => new Gate())
  await system.stop(ref)
  assert.is(ref.tell('late'), false)
  const err = await ref.ask('late-ask').catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.ACTOR_STOPPED))
  assert.is(system.deadLetters.stopped, 2)
  assert.is(letters.length, 2)
}))

test('the scheduler yields: a self-feeding actor does not starve timers or I/O', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  let handled = 0
  class Loop extends Actor<'go'> {
    receive (): void { handled++; this.self.tell('go') }
  }
  const ref = system.spawn(() => new Loop())
  ref.tell('go')
  // Without yielding, this timer could never fire and the test would time out.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const atTimer = handled
  assert.ok(atTimer > 0)
  system.kill(ref)
}))

test.run()
