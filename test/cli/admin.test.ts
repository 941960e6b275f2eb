/**
 * The administration commands through the real binary: `warren token create|ls|revoke|rotate-admin`
 * and `warren quota set|get|ls` against a `warren up` child, and the admin key kept by a restart
 * of `warren up` and replaced by `warren up --rotate-admin-key`.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { timed } from '../support/index.js'
import { mustBeUp, startUp } from '../security/warren-up.js'
import { warren } from './support.js'

const idOf = (token: string): string => /^wrn_([0-9a-z]{12})_/.exec(token)![1]!

test('token create/ls/revoke/rotate-admin and quota set/get/ls; the admin key survives a restart and is rotated by up --rotate-admin-key', timed(240_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cli-admin-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const data = join(dir, 'data')
  const config = join(dir, 'config.json')
  const { WARREN_TOKEN: _t, WARREN_URL: _u, ...base } = process.env
  const env = { ...base, WARREN_CONFIG: config }
  const as = (token: string): NodeJS.ProcessEnv => ({ ...env, WARREN_TOKEN: token })
  const up1 = mustBeUp(await startUp(data, config))
  defer(() => up1.kill('SIGTERM'))
  const admin1 = up1.token

  // create, with an expiry; the bounds of --expires named
  const created = await warren(['token', 'create', '--tenant', 'acme', '--expires', '30d'], { env })
  assert.is(created.status, 0, created.stderr)
  const key = created.stdout.trim()
  assert.match(key, /^wrn_[0-9a-z]{12}_/)
  for (const bad of ['0s', '3651d', '5w', '1y', '-1d', 'soon']) {
    const r = await warren(['token', 'create', '--tenant', 'acme', `--expires=${bad}`], { env })
    assert.is(r.status, 1, `--expires ${bad}: ${r.stdout}`)
    assert.match(r.stderr, /WARREN_ERR_INVALID_ARGUMENT: --expires/)
  }

  // ls: ids, tenants, scopes and expiry; never the secret
  const ls = await warren(['token', 'ls'], { env })
  assert.is(ls.status, 0, ls.stderr)
  assert.match(ls.stdout, /^ID\s+TENANT\s+SCOPES\s+CREATED\s+EXPIRES\s+LAST USED/)
  assert.match(ls.stdout, new RegExp(`${idOf(key)}\\s+acme\\s+sandbox:create,sandbox:exec,sandbox:read`))
  assert.match(ls.stdout, new RegExp(`${idOf(admin1)} \\(admin\\)\\s+admin`))
  for (const t of [key, admin1]) assert.not.ok(ls.stdout.includes(t.slice(17)), 'a secret is shown')
  const json = await warren(['token', 'ls', '--tenant', 'acme', '--json'], { env })
  assert.is(json.status, 0, json.stderr)
  const rows = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)
  assert.equal(rows.map((r) => r.id), [idOf(key)])
  assert.ok(Math.abs((rows[0]!.expiresAt as number) - (Date.now() + 30 * 86_400_000)) < 60_000)
  assert.not.ok(json.stdout.includes(key.slice(17)))

  // quotas (a rate given alone brings a burst of one second's worth)
  const set = await warren(['quota', 'set', 'acme', '--max-sandboxes', '5', '--creates-per-second', '2'], { env })
  assert.is(set.status, 0, set.stderr)
  assert.is(set.stdout, 'acme\tmaxSandboxes=5 createsPerSecond=2 createBurst=2 requestsPerSecond=10000 requestBurst=20000 trajectoryBytes=68719476736\n')
  assert.is((await warren(['quota', 'get', 'acme'], { env })).stdout, set.stdout)
  assert.is((await warren(['tenant', 'quotas', '--tenant', 'acme'], { env })).stdout, set.stdout)
  assert.ok((await warren(['quota', 'ls'], { env })).stdout.includes(set.stdout))
  const storage = await warren(['quota', 'set', 'acme', '--trajectory-storage', '2GiB'], { env })
  assert.match(storage.stdout, / trajectoryBytes=2147483648\n$/, storage.stderr)
  const badSize = await warren(['quota', 'set', 'acme', '--trajectory-storage', '2 parsecs'], { env })
  assert.match(badSize.stderr, /WARREN_ERR_INVALID_ARGUMENT: --trajectory-storage: sizes look like/)
  assert.equal((await warren(['tenant', 'ls'], { env })).stdout, (await warren(['quota', 'ls'], { env })).stdout)
  for (const [args, pattern] of [
    [['--max-sandboxes=-1'], /--max-sandboxes must be at least 0, not "-1"/],
    [['--max-sandboxes', 'many'], /--max-sandboxes must be a number/],
    [['--max-sandboxes', '2000000000'], /WARREN_ERR_INVALID_ARGUMENT: maxSandboxes must be/],
    [['--creates-per-second', '0'], /WARREN_ERR_INVALID_ARGUMENT: createsPerSecond must be/],
    [[], /at least one/]
  ] as Array<[string[], RegExp]>) {
    const r = await warren(['quota', 'set', 'acme', ...args], { env })
    assert.is(r.status, 1, `${args.join(' ')}: ${r.stdout}`)
    assert.match(r.stderr, pattern)
  }
  const ghost = await warren(['quota', 'get', 'ghost'], { env })
  assert.is(ghost.status, 1)
  assert.match(ghost.stderr, /WARREN_ERR_NOT_FOUND/)

  // a tenant's key is refused the admin commands
  for (const args of [['token', 'ls'], ['token', 'revoke', idOf(admin1)], ['token', 'rotate-admin'], ['quota', 'set', 'acme', '--max-sandboxes', '100'], ['quota', 'ls']]) {
    const r = await warren(args, { env: as(key) })
    assert.is(r.status, 1, args.join(' '))
    assert.match(r.stderr, /WARREN_ERR_FORBIDDEN: this key lacks the scope admin/)
  }

  // revoke: the key stops working; the admin key cannot be revoked (it is rotated)
  const revoked = await warren(['token', 'revoke', idOf(key)], { env })
  assert.is(revoked.stdout, `${idOf(key)}\trevoked\n`, revoked.stderr)
  assert.match((await warren(['ps'], { env: as(key) })).stderr, /WARREN_ERR_UNAUTHENTICATED/)
  assert.match((await warren(['token', 'revoke', idOf(key)], { env })).stderr, /WARREN_ERR_NOT_FOUND/)
  assert.match((await warren(['token', 'revoke', idOf(admin1)], { env })).stderr, /WARREN_ERR_INVALID_ARGUMENT: .*admin key: rotate it/)

  // rotate-admin: the new key is printed and written to the config that held the old one
  const rotated = await warren(['token', 'rotate-admin'], { env })
  assert.is(rotated.status, 0, rotated.stderr)
  const admin2 = rotated.stdout.trim().split(/\s/)[0]!
  assert.ok(admin2 !== admin1 && admin2.startsWith('wrn_'))
  assert.is((JSON.parse(readFileSync(config, 'utf8')) as { token: string }).token, admin2)
  assert.match((await warren(['token', 'ls'], { env: as(admin1) })).stderr, /WARREN_ERR_UNAUTHENTICATED/)
  assert.is((await warren(['token', 'ls'], { env })).status, 0)
  await up1.kill('SIGTERM')

  // a restart keeps the current admin key
  const up2 = mustBeUp(await startUp(data, config))
  defer(() => up2.kill('SIGTERM'))
  assert.is(up2.token, admin2)
  assert.match((await warren(['quota', 'get', 'acme'], { env })).stdout, /maxSandboxes=5/)
  await up2.kill('SIGTERM')

  // up --rotate-admin-key: for an operator who lost it, with the data dir
  const up3 = mustBeUp(await startUp(data, config, 20_000, ['--rotate-admin-key']))
  defer(() => up3.kill('SIGTERM'))
  assert.ok(up3.token !== admin2)
  assert.match((await warren(['token', 'ls'], { env: as(admin2) })).stderr, /WARREN_ERR_UNAUTHENTICATED/)
  assert.is((await warren(['token', 'ls'], { env: as(up3.token) })).status, 0)
}))

test.run()
