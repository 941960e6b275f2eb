/**
 * Finding 9 (reserved names) and the token-create part of finding 10, attacked as an admin
 * client would: names that are object-prototype keys, empty, over-long or with control
 * characters are refused naming the field, and a refused IAM request changes nothing.
 */
import { execFile } from 'node:child_process'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'
import { cli } from './warren-up.js'

const BAD_NAMES = ['__proto__', 'constructor', 'prototype', '', 'a'.repeat(65), 'tab\there', 'nl\nhere', 'nul\u0000here', 'del\u007fhere', '-leading-dash', 'sl/ash']
const DIGEST = `sha256:${'ab'.repeat(32)}`

async function refused (p: Promise<unknown>, code: string, field: string): Promise<void> {
  try {
    await p
  } catch (err) {
    assert.ok(isWarrenError(err), `not a WarrenError: ${String(err)}`)
    assert.is(err.code, code, err.message)
    assert.is(err.details?.field, field, `details ${JSON.stringify(err.details)}`)
    return
  }
  assert.unreachable(`accepted, expected ${code} naming ${field}`)
}

async function adminClient (defer: (fn: () => unknown) => void): Promise<{ client: Client, url: string, token: string }> {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const token = await cp.createToken('admin', ['admin'])
  const client = await connect({ url: cp.url, token })
  defer(() => client.close())
  return { client, url: cp.url, token }
}

test('reserved and malformed tenant names are refused with INVALID_ARGUMENT naming tenant (SDK)', timed(30_000, async (defer) => {
  const { client } = await adminClient(defer)
  for (const name of BAD_NAMES) {
    await refused(client.createToken(name, ['sandbox:read']), ErrorCodes.INVALID_ARGUMENT, 'tenant')
    await refused(client.quotas(name, { maxSandboxes: 3 }), ErrorCodes.INVALID_ARGUMENT, 'tenant')
  }
  const tenants = (await client.tenants()).map((t) => t.tenant)
  assert.equal(tenants, ['admin'], 'only the admin tenant exists')
  // Names as the README, the CLI and the tests use them still work.
  for (const name of ['t1', 'team-a', 'eval.2024', 'A', 'x'.repeat(63)]) await client.createToken(name, ['sandbox:read'])
}))

test('reserved and malformed tenant names are refused through the CLI', timed(30_000, async (defer) => {
  const { url, token } = await adminClient(defer)
  const warren = (args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> => new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { env: { ...process.env, WARREN_URL: url, WARREN_TOKEN: token }, timeout: 20_000 },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : (err as { code?: number }).code ?? null, stdout, stderr }))
  })
  for (const args of [['token', 'create', '--tenant', '__proto__', '--scopes', 'sandbox:read'], ['token', 'create', '--tenant', 'constructor'], ['tenant', 'quotas', '--tenant', 'prototype', '--max-sandboxes', '3']]) {
    const r = await warren(args)
    assert.is(r.code, 1, r.stderr)
    assert.match(r.stderr, /WARREN_ERR_INVALID_ARGUMENT/)
    assert.not.match(r.stderr, /\n\s+at /, 'no stack trace')
  }
  const set = await warren(['tenant', 'quotas', '--tenant', 'cli-t', '--max-sandboxes', '3'])
  assert.is(set.code, 0, set.stderr)
  assert.match(set.stdout, /^cli-t\tmaxSandboxes=3 /)
  const ls = await warren(['tenant', 'ls'])
  assert.is(ls.code, 0, ls.stderr)
  assert.equal(ls.stdout.split('\n').filter((l) => l !== '').map((l) => l.split('\t')[0]), ['admin', 'cli-t'])
}))

test('reserved and malformed image names are refused with INVALID_ARGUMENT naming name', timed(30_000, async (defer) => {
  const { client } = await adminClient(defer)
  const bad = ['__proto__', '__proto__:latest', 'constructor:v1', 'prototype:v1', 'ok:__proto__', 'ok:constructor', '', ':', 'ok:', 'a'.repeat(129) + ':v1', 'ok:' + 'v'.repeat(65), 'tab\t:v1', 'ok:nl\n',
    // Names a create would read as something else, so a tag of them could never be used.
    'debian:12', 'dir:x', 'sha256:v1']
  for (const name of bad) {
    await refused(client.request({ type: 'image-tag', name, digest: DIGEST, kind: 'base' }), ErrorCodes.INVALID_ARGUMENT, 'name')
  }
  assert.equal(await client.request({ type: 'image-list' }), [])
  await refused(client.request({ type: 'image-tag', name: 'fine:v1', digest: 'sha256:nothex', kind: 'base' }), ErrorCodes.INVALID_ARGUMENT, 'digest')
  await refused(client.request({ type: 'image-tag', name: 'fine:v1', digest: DIGEST, kind: 'root' as 'base' }), ErrorCodes.INVALID_ARGUMENT, 'kind')
  assert.equal(await client.request({ type: 'image-list' }), [], 'a refused tag leaves no name behind')
}))

test('a token-create refused for its scopes leaves no tenant behind', timed(30_000, async (defer) => {
  const { client } = await adminClient(defer)
  await refused(client.createToken('ghost', ['sandbox:read', 'root']), ErrorCodes.INVALID_ARGUMENT, 'scopes')
  await refused(client.createToken('ghost2', 'admin' as unknown as string[]), ErrorCodes.INVALID_ARGUMENT, 'scopes')
  await refused(client.createToken('ghost3', []), ErrorCodes.INVALID_ARGUMENT, 'scopes')
  const tenants = (await client.tenants()).map((t) => t.tenant)
  assert.equal(tenants, ['admin'], `tenants: ${tenants.join(', ')}`)
  await refused(client.quotas('ghost'), ErrorCodes.NOT_FOUND, 'tenant')
}))

test('a refused quota change changes nothing, for a new tenant or an existing one', timed(30_000, async (defer) => {
  const { client } = await adminClient(defer)
  await refused(client.quotas('fresh', { maxSandboxes: -1 }), ErrorCodes.INVALID_ARGUMENT, 'quotas.maxSandboxes')
  await refused(client.quotas('fresh', { createsPerSecond: 'many' as unknown as number }), ErrorCodes.INVALID_ARGUMENT, 'quotas.createsPerSecond')
  await refused(client.quotas('fresh', { maxSandboxes: 1.5 }), ErrorCodes.INVALID_ARGUMENT, 'quotas.maxSandboxes')
  await refused(client.quotas('fresh', { unheard: 1 } as unknown as { maxSandboxes: number }), ErrorCodes.INVALID_ARGUMENT, 'quotas.unheard')
  await refused(client.quotas('fresh'), ErrorCodes.NOT_FOUND, 'tenant')

  const set = await client.quotas('kept', { maxSandboxes: 5 })
  assert.is(set.maxSandboxes, 5)
  await refused(client.quotas('kept', { maxSandboxes: 9, createBurst: Number.NaN }), ErrorCodes.INVALID_ARGUMENT, 'quotas.createBurst')
  assert.equal(await client.quotas('kept'), set, 'the valid half of a refused change was not applied')
}))

test.run()
