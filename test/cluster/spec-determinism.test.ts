import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseSandboxSpec, resolveDeterminism, sandboxEnvironment } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'

/** The field a spec is refused for (BAD_SPEC), or undefined when it is taken. */
function refusedField (spec: unknown): string | undefined {
  try {
    parseSandboxSpec(spec)
    return undefined
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.BAD_SPEC), String(err))
    return err.details?.field as string
  }
}

test('deterministic: true is every default; an object fills what it leaves out; the seed is drawn at resolve, once', () => {
  const spec = parseSandboxSpec({ deterministic: true })
  assert.equal(spec.deterministic, { hostname: 'sandbox', tz: 'UTC', lang: 'C.UTF-8', sourceDateEpoch: 0 })
  const resolved = resolveDeterminism(spec)
  const seed = resolved.deterministic!.seed!
  assert.ok(Number.isInteger(seed) && seed >= 0 && seed <= 2 ** 32 - 1, String(seed))
  assert.is(resolveDeterminism(resolved), resolved, 'a resolved spec stays as it is')
  const partial = parseSandboxSpec({ deterministic: { tz: 'Europe/Paris', seed: 7 } })
  assert.equal(partial.deterministic, { hostname: 'sandbox', tz: 'Europe/Paris', lang: 'C.UTF-8', sourceDateEpoch: 0, seed: 7 })
  assert.is(resolveDeterminism(partial).deterministic!.seed, 7, 'a given seed is kept')
  assert.is(parseSandboxSpec({ deterministic: { seed: 2 ** 32 - 1, sourceDateEpoch: 2 ** 32 } }).deterministic!.seed, 2 ** 32 - 1)
})

test('the node lays the variables under the spec env (its own env wins) and fixes the hostname', () => {
  const spec = resolveDeterminism(parseSandboxSpec({ env: { TZ: 'Asia/Tokyo', A: '1' }, deterministic: { hostname: 'box-1', seed: 42, sourceDateEpoch: 1700000000 } }))
  assert.equal(sandboxEnvironment(spec), {
    env: { TZ: 'Asia/Tokyo', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', SOURCE_DATE_EPOCH: '1700000000', WARREN_SEED: '42', PYTHONHASHSEED: '42', A: '1' },
    hostname: 'box-1'
  })
  assert.equal(sandboxEnvironment(parseSandboxSpec({ env: { A: '1' } })), { env: { A: '1' } }, 'nothing without deterministic')
})

test('bad deterministic fields and pausedTtl are BAD_SPEC naming them', () => {
  const cases: Array<[string, unknown]> = [
    ['deterministic', false],
    ['deterministic', 'yes'],
    ['deterministic.hostname', { hostname: '' }],
    ['deterministic.hostname', { hostname: 'a'.repeat(64) }],
    ['deterministic.hostname', { hostname: 'a.b' }],
    ['deterministic.hostname', { hostname: 'a_b' }],
    ['deterministic.hostname', { hostname: '-bad' }],
    ['deterministic.hostname', { hostname: 'bad-' }],
    ['deterministic.tz', { tz: '' }],
    ['deterministic.tz', { tz: 'Europe/Paris Time' }],
    ['deterministic.tz', { tz: 'x'.repeat(65) }],
    ['deterministic.tz', { tz: 'UTC\n' }],
    ['deterministic.lang', { lang: 3 }],
    ['deterministic.lang', { lang: 'C\0' }],
    ['deterministic.sourceDateEpoch', { sourceDateEpoch: -1 }],
    ['deterministic.sourceDateEpoch', { sourceDateEpoch: 2 ** 32 + 1 }],
    ['deterministic.sourceDateEpoch', { sourceDateEpoch: 1.5 }],
    ['deterministic.seed', { seed: 2 ** 32 }],
    ['deterministic.seed', { seed: -1 }],
    ['deterministic.seed', { seed: '1' }],
    ['deterministic.color', { color: 'red' }]
  ]
  for (const [field, deterministic] of cases) assert.is(refusedField({ deterministic }), field, JSON.stringify(deterministic))
  assert.is(refusedField({ pausedTtl: 'no' }), 'pausedTtl')
  assert.is(refusedField({ pausedTtl: 0 }), 'pausedTtl')
  assert.is(parseSandboxSpec({ pausedTtl: false }).pausedTtl, false)
  assert.is(parseSandboxSpec({}).pausedTtl, undefined, 'absent means true')
})

test.run()
