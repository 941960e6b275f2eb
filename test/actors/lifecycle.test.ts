import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, isFailure, type ExitReason, type Ref } from '../../src/actors/index.js'
import { createError, ErrorCodes, isWarrenError } from '../../src/errors.js'
import { timed, waitFor } from '../support/index.js'

/** Records every lifecycle event into a shared log. */
class Recorder extends Actor<string> {
  constructor (private readonly name: string, private readonly log: string[], private readonly stopDelayMs = 0) { super() }
  receive (m: string): unknown {
    if (m === 'crash') throw new Error('boom')
    if (m === 'coded') throw createError(ErrorCodes.INVALID_ARGUMENT, 'bad request')
    if (m.startsWith('spawn:')) return this.ctx.spawn(() => new Recorder(m.slice(6), this.log))
    if (m === 'hang') { this.log.push(`${this.name} hanging`); return new Promise(() => {}) }
    return `${this.name}:${m}`
  }

  onTerminated (ref: Ref, reason: ExitReason): void { this.log.push(`${this.name} saw ${ref.address} end: ${String(reason)}`) }
  onChildExit (ref: Ref, reason: ExitReason): void { this.log.push(`${this.name} child ${ref.address} exit: ${isFailure(reason) ? 'failed' : reason}`) }
  async postStop (reason: ExitReason): Promise<void> {
    // A postStop that never finishes (and holds no timer that would keep the test process alive).
    if (this.stopDelayMs === Infinity) await new Promise(() => {})
    this.log.push(`${this.name} postStop ${isFailure(reason) ? 'failed' : reason}`)
  }
}

test('watching a dead actor delivers Terminated at once, with reason noproc', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const watcher = system.spawn(() => new Recorder('w', log))
  const target = system.spawn(() => new Recorder('t', log))
  await system.stop(target)
  const cell = (system as unknown as { cellOf (r: Ref): { actor: Actor } }).cellOf(watcher).actor
  cell.ctx.watch(target)
  await waitFor(() => log.some((l) => l.startsWith('w saw')), 2000, 'Terminated')
  assert.ok(log.includes(`w saw ${target.address} end: shutdown`) || log.includes(`w saw ${target.address} end: noproc`), log.join('\n'))
}))

test('watch is idempotent: two watches, one Terminated', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const watcher = system.spawn(() => new Recorder('w', log))
  const target = system.spawn(() => new Recorder('t', log))
  const w = (system as unknown as { cellOf (r: Ref): { actor: Actor } }).cellOf(watcher).actor
  w.ctx.watch(target)
  w.ctx.watch(target)
  await system.stop(target)
  assert.is(await watcher.ask('sync'), 'w:sync') // the Terminated signal is handled before this
  assert.equal(log.filter((l) => l.startsWith('w saw')), [`w saw ${target.address} end: shutdown`])
}))

test('a behaviour that throws fails its actor, not the process; the asker gets ACTOR_FAILED', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const failures: unknown[] = []
  system.on('actorFailed', (f) => failures.push(f))
  const parent = system.spawn(() => new Recorder('p', log))
  const child = await parent.ask<Ref<string>>('spawn:c')
  const err = await child.ask('crash').catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.ACTOR_FAILED))
  assert.ok(await system.whenTerminated(child).then(isFailure))
  await waitFor(() => log.includes(`p child ${child.address} exit: failed`), 2000, 'child exit signal')
  assert.ok(log.includes('c postStop failed'))
  assert.is(failures.length, 1)
  assert.is(await parent.ask('still-alive'), 'p:still-alive')
}))

test('a WarrenError thrown while answering an ask is the answer; the actor lives on', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Recorder('r', []))
  const err = await ref.ask('coded').catch((e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT))
  assert.ok(system.isAlive(ref))
  assert.is(await ref.ask('x'), 'r:x')
}))

test('graceful stop: children stop newest first, then the parent\'s postStop', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const parent = system.spawn(() => new Recorder('p', log))
  await parent.ask('spawn:a')
  await parent.ask('spawn:b')
  assert.is(await system.stop(parent), 'shutdown')
  assert.equal(log.filter((l) => l.includes('postStop')), ['b postStop shutdown', 'a postStop shutdown', 'p postStop shutdown'])
  assert.is(system.size, 0)
}))

test('stop timeout: an actor whose postStop hangs is killed after the timeout', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const ref = system.spawn(() => new Recorder('slow', log, Infinity))
  assert.is(await system.stop(ref, 50), 'killed')
  assert.not.ok(system.isAlive(ref))
}))

test('graceful stop waits for the message in hand; kill does not', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  const log: string[] = []
  const ref = system.spawn(() => new Recorder('h', log))
  ref.tell('hang')
  await waitFor(() => log.includes('h hanging'), 2000, 'the message in hand')
  const stopping = system.stop(ref, 'infinity')
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(system.isAlive(ref), 'still handling its message')
  system.kill(ref)
  assert.is(await stopping, 'killed')
}))

test('timers deliver to self and are cancelled when the actor stops', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  let ticks = 0
  class Ticker extends Actor<'tick'> {
    preStart (): void { this.ctx.setTimer('t', 1, 'tick', { repeat: true }) }
    receive (): void { ticks++ }
  }
  const ref = system.spawn(() => new Ticker())
  await waitFor(() => ticks >= 3, 2000, 'three ticks')
  await system.stop(ref)
  const after = ticks
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.is(ticks, after)
}))

test('defer: an actor answers an ask later while handling other messages', timed(5000, async (defer) => {
  const system = new ActorSystem()
  defer(() => system.shutdown(0))
  class Later extends Actor<string> {
    private pending: Array<{ resolve (v: unknown): void }> = []
    receive (m: string): unknown {
      if (m === 'wait') { this.pending.push(this.ctx.defer()); return undefined }
      for (const p of this.pending) p.resolve('released')
      return 'released them'
    }
  }
  const ref = system.spawn(() => new Later())
  const waiting = ref.ask('wait')
  assert.is(await ref.ask('go'), 'released them')
  assert.is(await waiting, 'released')
}))

test('names are unique; a duplicate is refused with DUPLICATE_NAME', timed(5000, async (defer) => {
  const system = new ActorSystem({ name: 'n1' })
  defer(() => system.shutdown(0))
  const ref = system.spawn(() => new Recorder('x', []), { name: 'x' })
  assert.is(ref.address, 'n1/x')
  assert.is(system.lookup('n1/x'), ref)
  try {
    system.spawn(() => new Recorder('x', []), { name: 'x' })
    assert.unreachable()
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.DUPLICATE_NAME))
  }
}))

test.run()
