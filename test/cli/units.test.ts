/**
 * The CLI's one parser of numbers and sizes: every number flag's form, bounds and refusal (an
 * INVALID_ARGUMENT naming the flag's field), so `--shards abc` or `--pids 1.5` never reach a server.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseMebibytes, parseNumber } from '../../src/cli/units.js'
import type { WarrenError } from '../../src/errors.js'

/** The refusal's code, field and message. */
function refusal (f: () => unknown): string {
  try {
    f()
  } catch (err) {
    const e = err as WarrenError
    return `${e.code} ${String(e.details?.field)}: ${e.message}`
  }
  throw new Error('not refused')
}

test('parseNumber takes what is typed, within its form and bounds', () => {
  assert.is(parseNumber('0.5', '--cpus'), 0.5)
  assert.is(parseNumber(' 8 ', '--pids', { whole: true }), 8)
  assert.is(parseNumber('65535', '--port', { whole: true, max: 65535 }), 65535)
  assert.is(parseNumber('0', '--limit', { min: 0 }), 0)
  assert.is(parseNumber('.5', '--cpus'), 0.5)
  assert.is(parseNumber('1e3', '--requests-per-second'), 1000)
})

test('parseNumber refuses, naming the flag and its field', () => {
  assert.is(refusal(() => parseNumber('two', '--cpus')), 'WARREN_ERR_INVALID_ARGUMENT cpus: --cpus must be a number, not "two"')
  assert.is(refusal(() => parseNumber('', '--cpus')), 'WARREN_ERR_INVALID_ARGUMENT cpus: --cpus must be a number, not ""')
  assert.is(refusal(() => parseNumber('Infinity', '--cpus')), 'WARREN_ERR_INVALID_ARGUMENT cpus: --cpus must be a number, not "Infinity"')
  // Only decimals: Number() would take these as 16, 1 and 10.
  for (const t of ['0x10', '0b1', '1_0']) {
    assert.match(refusal(() => parseNumber(t, '--requests-per-second')), /must be a number/, t)
  }
  for (const t of ['1.5', '-1', '1e3', '0x10', '99999999999999999999']) {
    assert.match(refusal(() => parseNumber(t, '--shards', { whole: true })), /^WARREN_ERR_INVALID_ARGUMENT shards: --shards must be a whole number/, t)
  }
  assert.is(refusal(() => parseNumber('0', '--shards', { whole: true, min: 1, max: 64 })), 'WARREN_ERR_INVALID_ARGUMENT shards: --shards must be at least 1 and at most 64, not "0"')
  assert.is(refusal(() => parseNumber('65536', '--port', { whole: true, max: 65535 })), 'WARREN_ERR_INVALID_ARGUMENT port: --port must be at most 65535, not "65536"')
  assert.is(refusal(() => parseNumber('0', '--duration', { above: 0 })), 'WARREN_ERR_INVALID_ARGUMENT duration: --duration must be more than 0, not "0"')
  // An argument, and a field of another name than the flag's.
  assert.is(refusal(() => parseNumber('x', 'N', { whole: true }, 'count')), 'WARREN_ERR_INVALID_ARGUMENT count: N must be a whole number, not "x"')
  assert.is(refusal(() => parseNumber('x', '--up-to', { whole: true }, 'upTo')), 'WARREN_ERR_INVALID_ARGUMENT upTo: --up-to must be a whole number, not "x"')
})

test('parseMebibytes takes plain MiB or a unit, and says both in its refusal', () => {
  assert.is(parseMebibytes('512', 'memory'), 512)
  assert.is(parseMebibytes('512MiB', 'memory'), 512)
  assert.is(parseMebibytes('1.5GiB', 'disk'), 1536)
  assert.is(refusal(() => parseMebibytes('2XB', 'memory')), 'WARREN_ERR_INVALID_ARGUMENT memory: --memory: sizes look like 512 (MiB), 512MiB or 2GiB, not 2XB')
  assert.is(refusal(() => parseMebibytes('-5', 'disk')), 'WARREN_ERR_INVALID_ARGUMENT disk: --disk: sizes look like 512 (MiB), 512MiB or 2GiB, not -5')
})

test.run()
