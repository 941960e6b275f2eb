import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem } from '../../src/actors/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { createVirtualClock } from '../../sim/clock.js'
import { timed } from '../support/index.js'

test('a simulated day of a ticking actor runs in wall-clock milliseconds, deterministically', timed(30_000, async (defer) => {
  const runs: number[][] = []
  for (let run = 0; run < 2; run++) {
    const clock = createVirtualClock()
    const system = new ActorSystem({ clock })
    defer(() => system.shutdown(0))
    const seen: number[] = []
    class Ticker extends Actor<'tick'> {
      preStart (): void { this.ctx.setTimer('t', 60_000, 'tick', { repeat: true }) }
      receive (): void { seen.push(clock.now()) }
    }
    system.spawn(() => new Ticker())
    const wall = performance.now()
    await clock.runUntil(24 * 3_600_000)
    assert.ok(performance.now() - wall < 10_000, 'far faster than real time')
    assert.is(seen.length, 24 * 60)
    assert.is(seen[0], 60_000)
    assert.is(seen[seen.length - 1], 24 * 3_600_000)
    runs.push(seen)
  }
  assert.equal(runs[0], runs[1])
}))

test('ask timeouts and async behaviour follow virtual time', timed(30_000, async (defer) => {
  const clock = createVirtualClock()
  const system = new ActorSystem({ clock })
  defer(() => system.shutdown(0))
  class Silent extends Actor<string> { receive (): unknown { return new Promise(() => {}) } }
  class Slow extends Actor<string> {
    receive (m: string): Promise<string> {
      return new Promise((resolve) => clock.setTimeout(() => resolve(`${m} at ${clock.now()}`), 1500))
    }
  }
  const silent = system.spawn(() => new Silent())
  const slow = system.spawn(() => new Slow())
  const timedOut = silent.ask('x', { timeoutMs: 5000 }).catch((e: unknown) => e)
  const answered = slow.ask('y', { timeoutMs: 5000 })
  await clock.runUntil(10_000)
  assert.is(await answered, 'y at 1500')
  const err = await timedOut
  assert.ok(isWarrenError(err, ErrorCodes.ASK_TIMEOUT))
}))

test.run()
