/**
 * KeySessions on fake links: an ended key's links close at once when idle, after the answers in
 * flight otherwise (at most `graceMs`), refuse new requests meanwhile, expire at their key's
 * expiry, and are forgotten once closed (nothing is held for a closed link).
 */
import { EventEmitter } from 'node:events'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { KeySessions, type RunRequest } from '../../../src/cluster/control/key-sessions.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../../src/errors.js'
import type { Link } from '../../../src/transport/index.js'
import { timed } from '../../support/index.js'

class FakeLink extends EventEmitter {
  state: 'open' | 'closed' = 'open'
  reason: WarrenError | undefined
  readonly done: Promise<WarrenError | undefined> = new Promise((resolve) => this.once('close', resolve))
  close (reason?: WarrenError): void {
    if (this.state === 'closed') return
    this.state = 'closed'
    this.reason = reason
    this.emit('close', reason)
  }
}

const principal = (keyId: string, expiresAt?: number) => ({ tenant: 't', keyId, scopes: ['sandbox:read' as const], ...(expiresAt !== undefined ? { expiresAt } : {}) })
const asLink = (l: FakeLink): Link => l as unknown as Link
const tracked = (r: RunRequest | WarrenError): RunRequest => {
  if (typeof r !== 'function') throw r
  return r
}

test('an idle link of a revoked key closes at once; other keys\' links are left alone; closed links are forgotten', timed(5000, async () => {
  const keys = new KeySessions({ graceMs: 50 })
  const a = new FakeLink()
  const b = new FakeLink()
  keys.track(asLink(a), principal('aaaaaaaaaaaa'))
  keys.track(asLink(b), principal('bbbbbbbbbbbb'))
  assert.is(keys.size, 2)
  keys.endKeys(['aaaaaaaaaaaa', 'cccccccccccc'])
  const why = await a.done
  assert.equal([why?.code, why?.details?.reason], [ErrorCodes.UNAUTHENTICATED, 'revoked'])
  assert.is(b.state, 'open')
  assert.is(keys.size, 1)
  b.close()
  assert.is(keys.size, 0)
}))

test('a request in flight is answered before the link closes; a new one is refused meanwhile', timed(5000, async () => {
  const keys = new KeySessions({ graceMs: 10_000 })
  const l = new FakeLink()
  const run = tracked(keys.track(asLink(l), principal('aaaaaaaaaaaa')))
  let finish!: (v: string) => void
  const inFlight = run(() => new Promise<string>((resolve) => { finish = resolve }))
  keys.endKeys(['aaaaaaaaaaaa'])
  assert.is(l.state, 'open')
  const refused = await run(async () => 'no').catch((e: unknown) => e)
  assert.ok(isWarrenError(refused, ErrorCodes.UNAUTHENTICATED), String(refused))
  let answeredWhileOpen = false
  finish('yes')
  assert.is(await inFlight.then((v) => { answeredWhileOpen = l.state === 'open'; return v }), 'yes')
  assert.ok(answeredWhileOpen, 'the answer came before the close')
  await l.done
}))

test('a request that outlives the grace does not keep the link open', timed(5000, async () => {
  const keys = new KeySessions({ graceMs: 50 })
  const l = new FakeLink()
  const run = tracked(keys.track(asLink(l), principal('aaaaaaaaaaaa')))
  void run(() => new Promise(() => {})).catch(() => {})
  keys.endKeys(['aaaaaaaaaaaa'])
  assert.is((await l.done)?.details?.reason, 'revoked')
}))

test('a link closes at its key\'s expiry (reason expired); one already past it at once', timed(5000, async () => {
  const keys = new KeySessions()
  const soon = new FakeLink()
  keys.track(asLink(soon), principal('aaaaaaaaaaaa', Date.now() + 100))
  const past = new FakeLink()
  keys.track(asLink(past), principal('bbbbbbbbbbbb', Date.now() - 1))
  assert.is(past.state, 'closed')
  assert.is((await soon.done)?.details?.reason, 'expired')
  assert.is(keys.size, 0)
}))

test.run()

test('a key holding maxPerKey links has its next one closed with WARREN_ERR_QUOTA; once one closes, a new one is let in', timed(5000, async () => {
  const keys = new KeySessions({ maxPerKey: 2 })
  const [a, b, c, d] = [new FakeLink(), new FakeLink(), new FakeLink(), new FakeLink()]
  tracked(keys.track(asLink(a), principal('aaaaaaaaaaaa')))
  tracked(keys.track(asLink(b), principal('aaaaaaaaaaaa')))
  tracked(keys.track(asLink(d), principal('dddddddddddd')))
  const refused = keys.track(asLink(c), principal('aaaaaaaaaaaa'))
  assert.ok(isWarrenError(refused, ErrorCodes.QUOTA), String(refused))
  assert.equal([c.state, c.reason?.code, c.reason?.details?.limit], ['closed', ErrorCodes.QUOTA, 2])
  assert.is(keys.size, 3, 'the refused link is not counted')
  a.close()
  const e = new FakeLink()
  tracked(keys.track(asLink(e), principal('aaaaaaaaaaaa')))
  assert.is(e.state, 'open')
}))
