/**
 * File names as bytes (src/file-names.ts): any bytes decode to a string that encodes back to
 * exactly them, as Python's surrogateescape does, and only names that are not UTF-8 leave the
 * wire's str form.
 */
import { randomBytes } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError, toWireError, createError, ErrorCodes } from '../src/errors.js'
import { isUtf8Name, nameFromBytes, nameFromWire, nameToBytes, nameToWire } from '../src/file-names.js'
import { wellFormed } from '../src/text.js'

test('bytes that are not UTF-8 decode as Python\'s surrogateescape does, and encode back exactly', () => {
  // The same strings b.decode('utf-8', 'surrogateescape') gives.
  const cases: Array<[number[], string]> = [
    [[0x63, 0x61, 0x66, 0xe9], 'caf\udce9'],
    [[0xff], '\udcff'],
    [[0xc3, 0xa9], 'é'],
    [[0xe2, 0x82], '\udce2\udc82'], // a sequence cut short
    [[0xc0, 0xaf], '\udcc0\udcaf'], // an overlong '/'
    [[0xed, 0xa0, 0x80], '\udced\udca0\udc80'], // an encoded surrogate
    [[0xf0, 0x9f, 0x98, 0x80, 0x80], '😀\udc80']
  ]
  for (const [bytes, text] of cases) {
    assert.is(nameFromBytes(Uint8Array.from(bytes)), text, JSON.stringify(bytes))
    assert.equal([...nameToBytes(text)], bytes, JSON.stringify(text))
  }
})

test('any bytes round-trip, and a name decoded from valid UTF-8 stays a plain string on the wire', () => {
  for (let i = 0; i < 2000; i++) {
    const b = randomBytes(1 + (i % 40))
    const name = nameFromBytes(b)
    assert.ok(Buffer.from(nameToBytes(name)).equals(b), b.toString('hex'))
    const wire = nameToWire(name)
    assert.is(typeof wire === 'string', Buffer.from(name, 'utf8').equals(b), `wire form of ${b.toString('hex')}`)
    assert.is(nameFromWire(wire), name)
  }
  assert.is(nameToWire('é/😀'), 'é/😀')
  assert.ok(isUtf8Name('é/😀') && !isUtf8Name('a\udce9'))
})

test('a lone surrogate that is no byte\'s escape is refused naming the field', () => {
  for (const bad of ['\ud800', 'a\udc00b', '\udc7f']) {
    const err = (() => { try { nameToBytes(bad, 'to'); return undefined } catch (e) { return e } })()
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
    assert.is(err.details?.field, 'to')
  }
})

test('an error echoing such a name crosses the wire well-formed: escaped bytes shown as \\xHH', () => {
  assert.is(wellFormed('caf\udce9 \ud800'), 'caf\\xe9 \ufffd')
  const wire = toWireError(createError(ErrorCodes.NOT_FOUND, '/t/caf\udce9: no such file', { path: '/t/caf\udce9', n: 1 }))
  assert.is(wire.message, '/t/caf\\xe9: no such file')
  assert.equal(wire.details, { path: '/t/caf\\xe9', n: 1 })
})

test.run()
