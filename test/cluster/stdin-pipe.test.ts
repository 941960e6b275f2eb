import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { StdinPipe } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { timed } from '../support/index.js'

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

async function readAll (pipe: StdinPipe): Promise<string> {
  let out = ''
  for await (const chunk of pipe) out += new TextDecoder().decode(chunk)
  return out
}

test('writes at their offsets are taken once: a retried write is skipped, an overlapping one adds only its tail', timed(5000, async () => {
  const pipe = new StdinPipe()
  assert.equal(pipe.write(0, bytes('abc'), false), { received: 3, closed: false })
  assert.equal(pipe.write(0, bytes('abc'), false), { received: 3, closed: false }, 'a retry')
  assert.equal(pipe.write(2, bytes('cde'), false), { received: 5, closed: false })
  pipe.write(5, undefined, true)
  assert.is(await readAll(pipe), 'abcde')
}))

test('a gap is refused; bad input is INVALID_ARGUMENT', timed(5000, async () => {
  const pipe = new StdinPipe()
  for (const [offset, data] of [[4, bytes('x')], [-1, bytes('x')], [1.5, bytes('x')], [0, 'text']] as const) {
    const err = (() => { try { pipe.write(offset, data, false); return undefined } catch (e) { return e } })()
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${offset} ${String(data)}`)
  }
}))

test('beyond the buffer a write is OVERLOADED with a retry hint, and fits once the reader has read', timed(5000, async () => {
  const pipe = new StdinPipe(4)
  pipe.write(0, bytes('abcd'), false)
  const full = (() => { try { pipe.write(4, bytes('e'), false); return undefined } catch (e) { return e } })()
  assert.ok(isWarrenError(full, ErrorCodes.OVERLOADED))
  assert.type(full.details?.retryAfterMs, 'number')
  const it = pipe[Symbol.asyncIterator]()
  assert.is(new TextDecoder().decode((await it.next()).value as Uint8Array), 'abcd')
  assert.equal(pipe.write(4, bytes('e'), true), { received: 5, closed: false })
  assert.is(new TextDecoder().decode((await it.next()).value as Uint8Array), 'e')
  assert.ok((await it.next()).done, 'eof after everything written')
}))

test('close (the command ended) ends the reader at once, and later writes go nowhere', timed(5000, async () => {
  const pipe = new StdinPipe()
  const reading = readAll(pipe)
  pipe.write(0, bytes('unread'), false)
  pipe.close()
  assert.is(await reading, '', 'what the command did not read is dropped')
  assert.equal(pipe.write(6, bytes('late'), false), { received: 6, closed: true })
}))

test.run()
