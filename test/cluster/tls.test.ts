/**
 * A cluster served over TLS, end to end: the control plane on wss:// and https://, an operator
 * pushing a layer over https, a node (`warren node --join wss://… --ca F`, a child process)
 * joining and loading that layer on demand over https, an SDK client creating a container
 * sandbox from it, running a command and cutting a snapshot (the node pushes it over https);
 * a node and a client with the wrong CA refused, naming TLS; `warren up` refusing bad files.
 */
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { buildLayerFromDir } from '../../src/images/index.js'
import { pushLayerOverHttp } from '../../src/images/upload/index.js'
import { connect } from '../../src/sdk/index.js'
import { loadServerTls } from '../../src/transport/index.js'
import { makeTestCerts, type TestCerts } from '../support/certs.js'
import { timed } from '../support/index.js'
import { busyboxTree, functionsDir, repoRoot, spawnNode, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`TLS container tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

let certs: TestCerts
test.before(() => { certs = makeTestCerts() })
test.after(() => certs.remove())

type Defer = (fn: () => unknown) => void

async function tlsControlPlane (defer: Defer, dir: string) {
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp'), tls: loadServerTls(certs.certFile, certs.keyFile) })
  defer(() => cp.close())
  return cp
}

ctest('over TLS: a node joins with --ca, a layer goes up and down over https, the SDK creates, execs and snapshots', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await tlsControlPlane(defer, dir)
  assert.match(cp.url, /^wss:\/\/127\.0\.0\.1:\d+$/)
  const admin = await cp.createToken('tls', ['admin'])
  const layer = await buildLayerFromDir(busyboxTree(join(dir, 'tree'), ['sh', 'cat', 'echo']), join(dir, 'build'))
  const pushed = await pushLayerOverHttp(layer.path, { url: cp.url, token: admin, kind: 'base', ca: certs.ca })
  assert.is(pushed.digest, layer.digest)
  const node = await spawnNode(cp, 'tls-node', join(dir, 'node'), ['--ca', certs.caFile])
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: admin, ca: certs.caFile })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', image: { base: pushed.digest }, limits: { cpus: 0.2, memoryMiB: 64 } })
  const r = await sb.exec(['sh', '-c', 'echo over tls > /f && cat /f'])
  assert.is(r.exitCode, 0, r.stderr)
  assert.is(r.stdout, 'over tls\n')
  const snap = await sb.snapshot()
  const again = await client.create({ snapshot: snap.id, limits: { cpus: 0.2, memoryMiB: 64 } })
  assert.is((await again.exec(['cat', '/f'])).stdout, 'over tls\n')
  await again.kill()
  await sb.kill()
}))

test('over TLS: a client with the wrong CA, or a plain ws:// URL, is refused at once; the right CA as PEM text connects', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await tlsControlPlane(defer, dir)
  const token = await cp.createToken('tls', ['admin'])
  // A node in this process, given the CA as PEM text.
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tls-fn', ca: certs.ca, functionsDir })
  defer(() => node.close())
  for (const [url, ca, cause] of [[cp.url, certs.wrongCaFile, /CERT|ISSUER|SIGNATURE/], [cp.url.replace('wss:', 'ws:'), undefined, /TLS_REQUIRED/]] as const) {
    const started = Date.now()
    const err = await connect({ url, token, connectTimeoutMs: 20_000, ...(ca !== undefined ? { ca } : {}) }).then(async (c) => { await c.close(); return undefined }, (e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED), String(err))
    assert.is((err as WarrenError).details?.reason, 'tls')
    assert.match(String((err as WarrenError).details?.cause), cause)
    // Refused, not retried until the connect timeout ran out.
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`)
  }
  const client = await connect({ url: cp.url, token, ca: certs.ca })
  defer(() => client.close())
  // The CLI: `warren --ca F CMD` trusts the CA; without it the same command is refused naming TLS.
  const env = { ...process.env, WARREN_URL: cp.url, WARREN_TOKEN: token, WARREN_CONFIG: join(dir, 'none.json'), WARREN_CA: '' }
  // Not spawnSync: this process serves the control plane the CLI talks to.
  const cli = async (args: string[]): Promise<{ status: number, stdout: string, stderr: string }> => await new Promise((resolve) => {
    execFile(process.execPath, [join(repoRoot, 'bin', 'warren.js'), ...args], { encoding: 'utf8', timeout: 30_000, env }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr })
    })
  })
  const listed = await cli(['--ca', certs.caFile, 'ps'])
  assert.is(listed.status, 0, listed.stderr)
  assert.match(listed.stdout, /^ID\s+STATE/)
  const refused = await cli(['ps'])
  assert.is(refused.status, 1, refused.stderr)
  assert.match(refused.stderr, /TLS refused the connection to wss:.*not trusted/)
  const sb = await client.create({ backend: 'function' })
  assert.is((await sb.exec(['js', 'console.log(6*7)'])).stdout.trim(), '42')
}))

test('over TLS: warren node with the wrong CA exits at once naming the certificate', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await tlsControlPlane(defer, dir)
  const err = await spawnNode(cp, 'tls-wrong', join(dir, 'node'), ['--ca', certs.wrongCaFile, '--no-lazy-layers']).then(async (n) => { await n.kill(); return undefined }, (e: unknown) => e)
  assert.ok(err instanceof Error, 'the node joined with the wrong CA')
  assert.match(err.message, /exited with 1/)
  assert.match(err.message, /TLS refused the connection to wss:\/\/127\.0\.0\.1:\d+: its certificate is not trusted/)
}))

test('warren up refuses unreadable or mismatched TLS files with one line naming the flag', timed(60_000, () => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  try {
    for (const [args, flag] of [
      [['--tls-cert', join(dir, 'missing.pem'), '--tls-key', certs.keyFile], /--tls-cert/],
      [['--tls-cert', certs.certFile, '--tls-key', certs.otherKeyFile], /does not belong to the certificate/],
      [['--tls-cert', certs.certFile], /both --tls-cert FILE and --tls-key FILE/]
    ] as const) {
      const r = spawnSync(process.execPath, [join(repoRoot, 'bin', 'warren.js'), 'up', '--port', '0', '--no-local-node', '--data-dir', join(dir, 'data'), ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, WARREN_CONFIG: join(dir, 'config.json') } })
      assert.is(r.status, 1, r.stderr)
      assert.match(r.stderr, flag)
      assert.is(r.stderr.trim().split('\n').length, 1, r.stderr)
      assert.not.match(r.stderr, /\n\s+at /)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}))

test('a reloaded certificate is served to new connections; open ones keep theirs', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tls-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await tlsControlPlane(defer, dir)
  const token = await cp.createToken('tls', ['admin'])
  const before = await connect({ url: cp.url, token, ca: certs.ca })
  defer(() => before.close())
  await cp.reloadTls(loadServerTls(certs.renewedCertFile, certs.keyFile))
  const old = await connect({ url: cp.url, token, ca: certs.ca, connectTimeoutMs: 20_000 }).then(async (c) => { await c.close(); return undefined }, (e: unknown) => e)
  assert.is((old as WarrenError | undefined)?.details?.reason, 'tls', 'the old CA no longer verifies new connections')
  const after = await connect({ url: cp.url, token, ca: certs.wrongCaFile })
  defer(() => after.close())
  assert.equal(await after.list(), [])
  assert.equal(await before.list(), [], 'the connection opened before the reload goes on')
  const plain = await startTestControlPlane()
  defer(() => plain.close())
  const err = await plain.reloadTls(loadServerTls(certs.certFile, certs.keyFile)).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
}))

test('a deployment\'s join token (WARREN_JOIN_TOKEN) is used as given, and a malformed one refused naming it', timed(60_000, async (defer) => {
  const given = `wrnj_${'a1'.repeat(32)}`
  const cp = await startTestControlPlane({ joinToken: given })
  defer(() => cp.close())
  assert.is(cp.joinToken, given)
  const node = await startNode({ url: cp.url, joinToken: given, nodeId: 'given-token', functionsDir })
  defer(() => node.close())
  for (const bad of ['wrnj_short', 'wrn_' + 'a'.repeat(40), `wrnj_${'a'.repeat(40)} `]) {
    const err = await startTestControlPlane({ joinToken: bad }).then(async (c) => { await c.close(); return undefined }, (e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${bad}: ${String(err)}`)
    assert.is((err as WarrenError).details?.field, 'joinToken')
  }
}))

test.run()
