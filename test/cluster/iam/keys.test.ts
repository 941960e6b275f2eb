/**
 * API keys in the IamStore: expiry on an injected clock, bounds of a key's life, listing that
 * never shows a secret or hash, revocation, the sparing write of last use, and the admin key
 * kept in the data dir across restarts and rotated.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AdminKeys, IamDefaults, IamStore, keyIdOf, newToken } from '../../../src/cluster/iam/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { openState } from '../../../src/state/index.js'
import { timed } from '../../support/index.js'
import { clockStore } from './helpers.js'

function refused (fn: () => unknown, code: string, field: string): void {
  try {
    fn()
  } catch (err) {
    assert.ok(isWarrenError(err), String(err))
    assert.is(err.code, code, err.message)
    assert.is(err.details?.field, field, JSON.stringify(err.details))
    return
  }
  assert.unreachable(`accepted, expected ${code} naming ${field}`)
}

const idOf = (token: string): string => keyIdOf(token)!


test('a key with an expiry works until then and is refused from then on', timed(10_000, (defer) => {
  const { store, clock } = clockStore(defer)
  const token = store.createKey('t', ['sandbox:read'], { expiresInMs: 60_000 })
  const at = clock.now + 60_000
  assert.is(store.authenticate(token)?.expiresAt, at)
  clock.now = at - 1
  assert.is(store.authenticate(token)?.tenant, 't')
  clock.now = at
  assert.is(store.authenticate(token), undefined)
  const forever = store.createKey('t', ['sandbox:read'])
  clock.now += IamDefaults.maxKeyLifeMs
  assert.is(store.authenticate(forever)?.expiresAt, undefined)
}))

test('a key\'s life is bounded: 1 s to 10 years, whole ms; a refusal names expiresInMs and writes nothing', timed(10_000, (defer) => {
  const { store } = clockStore(defer)
  for (const bad of [0, 999, IamDefaults.maxKeyLifeMs + 1, 1500.5, Number.NaN, -1000]) {
    refused(() => store.createKey('t', ['sandbox:read'], { expiresInMs: bad }), ErrorCodes.INVALID_ARGUMENT, 'expiresInMs')
  }
  assert.equal(store.listKeys(), [])
  store.createKey('t', ['sandbox:read'], { expiresInMs: IamDefaults.minKeyLifeMs })
  store.createKey('t', ['sandbox:read'], { expiresInMs: IamDefaults.maxKeyLifeMs })
  assert.is(store.listKeys().length, 2)
}))

test('listing shows ids, tenants, scopes and times, never a secret or hash; by tenant and in pages', timed(10_000, (defer) => {
  const { store, clock } = clockStore(defer)
  const tokens = Array.from({ length: 5 }, (_, i) => store.createKey(i < 3 ? 'a' : 'b', ['sandbox:read', 'sandbox:exec'], i === 0 ? { expiresInMs: 5000 } : {}))
  const all = store.listKeys()
  assert.is(all.length, 5)
  const text = JSON.stringify(all)
  for (const t of tokens) {
    const [, id, secret] = /^wrn_([0-9a-z]{12})_(.+)$/.exec(t)!
    assert.ok(text.includes(id!))
    assert.not.ok(text.includes(secret!), 'a secret is listed')
  }
  assert.not.ok(/[0-9a-f]{64}/.test(text), 'a hash is listed')
  for (const k of all) assert.equal(Object.keys(k).filter((n) => !['id', 'tenant', 'scopes', 'createdAt', 'expiresAt', 'lastUsedAt', 'admin'].includes(n)), [])
  assert.equal(all.map((k) => k.id), [...all.map((k) => k.id)].sort())
  assert.is(all.find((k) => tokens[0]!.includes(k.id))?.expiresAt, clock.now + 5000)
  assert.is(store.listKeys({ tenant: 'b' }).length, 2)
  assert.is(store.listKeys({ tenant: 'nobody' }).length, 0)
  const first = store.listKeys({ limit: 2 })
  const rest = store.listKeys({ after: first[1]!.id })
  assert.equal([...first, ...rest].map((k) => k.id), all.map((k) => k.id))
  assert.is(store.listKeys({ limit: 10_000 }).length, 5)
}))

test('last use is written at the first login and then at most once an hour', timed(10_000, (defer) => {
  const { store, clock } = clockStore(defer)
  const token = store.createKey('t', ['sandbox:read'])
  const used = (): number | undefined => store.listKeys()[0]!.lastUsedAt
  assert.is(used(), undefined)
  const t0 = clock.now
  store.authenticate(token)
  assert.is(used(), t0)
  clock.now += IamDefaults.lastUsedResolutionMs - 1
  store.authenticate(token)
  assert.is(used(), t0)
  clock.now += 1
  store.authenticate(token)
  assert.is(used(), clock.now)
}))

test('a revoked key is refused; an unknown or malformed id revokes nothing; the admin key is rotated, not revoked', timed(10_000, (defer) => {
  const { store } = clockStore(defer)
  const token = store.createKey('t', ['sandbox:read'])
  const id = store.authenticate(token)!.keyId
  assert.is(store.revokeKey('zzzzzzzzzzzz'), false)
  assert.is(store.revokeKey('../etc'), false)
  assert.is(store.revokeKey(id), true)
  assert.is(store.authenticate(token), undefined)
  assert.is(store.revokeKey(id), false)
  const admin = new AdminKeys(store).ensure()
  refused(() => store.revokeKey(store.adminKeyId()!), ErrorCodes.INVALID_ARGUMENT, 'id')
  assert.is(store.authenticate(admin.token)?.tenant, 'admin')
}))

test('the admin key: made once (given to persist before it is committed), kept by its token across restarts, rotated on request, never guessed', timed(20_000, (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-admin-key-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const start = (): { store: IamStore, keys: AdminKeys, close: () => void } => {
    const state = openState(dir)
    const store = new IamStore(state.db)
    return { store, keys: new AdminKeys(store), close: () => state.close() }
  }
  const a = start()
  let persisted: string | undefined
  const made = a.keys.ensure({ persist: (t) => { persisted = t; assert.is(a.store.adminKeyId(), undefined, 'persisted before the commit') } })
  assert.equal([made.how, made.token], ['created', persisted])
  a.close()

  const b = start()
  // A restart knows the key only from its candidate (the config file's token).
  assert.equal(b.keys.ensure(), { token: undefined, how: 'lost', ended: [] })
  const other = b.store.createKey('t', ['admin'])
  assert.is(b.keys.ensure({ candidate: other }).how, 'lost', 'an admin-scoped key is not the admin key')
  const kept = b.keys.ensure({ candidate: made.token! })
  assert.equal([kept.how, kept.token], ['kept', made.token])
  assert.is(b.keys.ensure().token, made.token, 'remembered once shown')
  const rotated = b.keys.ensure({ rotate: true })
  assert.is(rotated.how, 'rotated')
  assert.equal(rotated.ended, [idOf(made.token!)])
  assert.is(b.store.authenticate(made.token), undefined)
  assert.is(b.store.authenticate(rotated.token)?.scopes[0], 'admin')
  assert.is(b.store.listKeys().filter((k) => k.admin === true).length, 1)
  // Rotated over the API: the new key is answered, the one before revoked.
  const again = b.keys.rotate()
  assert.equal(again.ended, [idOf(rotated.token!)])
  b.close()

  // Only hashes are in the data dir: no admin secret in any of its files.
  for (const f of readdirSync(dir)) {
    const bytes = readFileSync(join(dir, f), 'latin1')
    for (const t of [made.token!, rotated.token!, again.token]) assert.not.ok(bytes.includes(t.slice(17)), `an admin key's secret is in ${f}`)
  }
}))

test('a declared admin key (a deployment\'s secret): made the admin key, kept while it is, a new one rotates; malformed, another key\'s, or with a rotation: refused naming it', timed(20_000, (defer) => {
  const { store } = clockStore(defer)
  const keys = new AdminKeys(store)
  const first = newToken()
  let persisted: string | undefined
  assert.equal(keys.ensure({ declared: first, persist: (t) => { persisted = t } }), { token: first, how: 'created', ended: [] })
  assert.is(persisted, first)
  assert.is(store.authenticate(first)?.tenant, 'admin')
  // A restart with the same secret keeps it, without a candidate.
  assert.equal(new AdminKeys(store).ensure({ declared: first }), { token: first, how: 'kept', ended: [] })
  // A changed secret rotates: the one before is revoked.
  const second = newToken()
  assert.equal(new AdminKeys(store).ensure({ declared: second }), { token: second, how: 'rotated', ended: [idOf(first)] })
  assert.is(store.authenticate(first), undefined)
  assert.is(store.adminKeyId(), idOf(second))
  const fieldOf = (f: () => unknown): unknown => { try { f(); return 'no error' } catch (err) { return isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) ? err.details?.field : err } }
  for (const bad of ['', 'wrn_short', `${second}x`, `wrn_${'A'.repeat(12)}_${'a'.repeat(43)}`, `wrn_${'a'.repeat(12)}_${'a'.repeat(42)}\n`]) {
    assert.is(fieldOf(() => keys.ensure({ declared: bad })), 'WARREN_ADMIN_KEY', JSON.stringify(bad))
  }
  const tenantKey = store.createKey('t', ['sandbox:create'])
  assert.is(fieldOf(() => keys.ensure({ declared: tenantKey })), 'WARREN_ADMIN_KEY', 'a tenant\'s key never becomes the admin key')
  assert.is(store.authenticate(tenantKey)?.tenant, 't', 'and it stays the tenant\'s')
  assert.is(fieldOf(() => keys.ensure({ declared: second, rotate: true })), 'rotate-admin-key')
  assert.is(store.adminKeyId(), idOf(second), 'nothing changed by a refusal')
}))

test.run()
