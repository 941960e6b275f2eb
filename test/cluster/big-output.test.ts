import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import type { ControlPlane } from '../../src/cluster/index.js'
import { ALL_SCOPES, repoRoot, spawnNode, startTestControlPlane } from './harness.js'
import { containerSkip } from '../security/support.js'
import { timed } from '../support/index.js'

if (containerSkip !== undefined) console.log(`big output tests skipped: ${containerSkip}`)
const ctest = containerSkip === undefined ? test : test.skip

/**
 * A control plane, one node process and a tenant's client. The node, busy streaming 100 MB on a
 * shared 2-core machine, may beat its heart late: the harness's 1.5 s would declare it lost
 * mid-stream, which is not what these tests are about.
 */
async function tenantCluster (defer: (fn: () => unknown) => void, nodeId: string): Promise<{ cp: ControlPlane, client: Client }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-big-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 15_000 })
  defer(() => cp.close())
  const node = await spawnNode(cp, nodeId, join(dir, 'node'))
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { cp, client }
}

const BYTES = 100_000_000
/** 100 MB of random bytes on stdout, and their sha256, computed in the sandbox, on stderr. */
const FLOOD = `rm -f /tmp/f; mkfifo /tmp/f; sha256sum < /tmp/f >&2 & head -c ${BYTES} /dev/urandom | tee /tmp/f; wait`

function sandboxHash (stderr: string): string {
  const m = /^([0-9a-f]{64}) /.exec(stderr)
  assert.ok(m !== null, `no hash in ${JSON.stringify(stderr.slice(0, 200))}`)
  return m[1]!
}

ctest('100 MB of stdout arrive byte-exact through exec, spawn and warren run, with no cap asked for', timed(300_000, async (defer) => {
  const { cp, client } = await tenantCluster(defer, 'big-out')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())

  let t0 = Date.now()
  const whole = createHash('sha256')
  let n = 0
  const r = await sb.exec(['sh', '-c', FLOOD], { onStdout: (b) => { whole.update(b); n += b.byteLength } })
  assert.is(r.exitCode, 0, r.stderr)
  assert.not.ok(r.truncated)
  assert.is(n, BYTES)
  assert.is(whole.digest('hex'), sandboxHash(r.stderr))
  console.log(`  exec: ${BYTES / 1e6} MB in ${Date.now() - t0} ms`)

  t0 = Date.now()
  const h = sb.spawn(['sh', '-c', FLOOD])
  const iterated = createHash('sha256')
  let err = ''
  n = 0
  for await (const c of h) {
    if (c.stream === 'stdout') { iterated.update(c.data); n += c.data.byteLength } else err += new TextDecoder().decode(c.data)
  }
  assert.is((await h.wait()).exitCode, 0)
  assert.is(n, BYTES)
  assert.is(iterated.digest('hex'), sandboxHash(err))
  console.log(`  spawn: ${BYTES / 1e6} MB in ${Date.now() - t0} ms`)

  // warren run, its stdout piped into a hash in this process.
  const dir = mkdtempSync(join(tmpdir(), 'warren-big-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ url: cp.url, token: await cp.createToken('tenant-a', ['sandbox:create', 'sandbox:exec', 'sandbox:read']) }), { mode: 0o600 })
  t0 = Date.now()
  const run = spawn(process.execPath, [join(repoRoot, 'bin', 'warren.js'), 'run', '--backend', 'container', '--', 'sh', '-c', FLOOD], {
    env: { ...process.env, WARREN_CONFIG: join(dir, 'config.json') }, stdio: ['ignore', 'pipe', 'pipe']
  })
  defer(() => { if (run.exitCode === null) run.kill('SIGKILL') })
  const cli = createHash('sha256')
  let cliErr = ''
  n = 0
  run.stdout.on('data', (b: Buffer) => { cli.update(b); n += b.length })
  run.stderr.on('data', (b: Buffer) => { cliErr += b.toString() })
  const code = await new Promise<number | null>((resolve) => run.once('close', (c) => resolve(c)))
  assert.is(code, 0, cliErr)
  assert.is(n, BYTES)
  assert.is(cli.digest('hex'), sandboxHash(cliErr))
  console.log(`  warren run: ${BYTES / 1e6} MB in ${Date.now() - t0} ms`)
}))

ctest('in a plain script a failing exec rejects its awaited promise and nothing escapes as an unhandled rejection', timed(120_000, async (defer) => {
  const { cp } = await tenantCluster(defer, 'big-rej')
  const dir = mkdtempSync(join(tmpdir(), 'warren-rej-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const sdk = join(repoRoot, 'dist', 'src', 'sdk', 'index.js')
  const token = await cp.createToken('tenant-a', ['sandbox:create', 'sandbox:exec', 'sandbox:read'])
  // No unhandledRejection handler: Node's default ends the process on one, with exit code 1.
  writeFileSync(join(dir, 'script.mjs'), `
    import { connect } from ${JSON.stringify(sdk)}
    const client = await connect({ url: ${JSON.stringify(cp.url)}, token: ${JSON.stringify(token)} })
    const sb = await client.create({ backend: 'container' })
    const codes = []
    const note = (e) => codes.push(e.code + (e.details?.field ? ':' + e.details.field : ''))
    await sb.exec('true', { cwd: '/nope' }).catch(note)
    await sb.exec('true', { maxOutputBytes: 2 ** 40 }).catch(note)
    sb.spawn('true', { cwd: '/nope' })                 // never awaited, never read
    sb.spawn('yes', { user: 'nosuch' })               // never awaited, never read
    const big = sb.spawn('yes')                       // its sandbox is killed under it
    await new Promise((r) => setTimeout(r, 300))
    await sb.kill()
    await big.wait().catch(note)
    await sb.exec('true').catch(note)
    await new Promise((r) => setTimeout(r, 500))
    await client.close()
    console.log(JSON.stringify(codes))
  `)
  const child = spawn(process.execPath, [join(dir, 'script.mjs')], { stdio: ['ignore', 'pipe', 'pipe'] })
  defer(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (b: Buffer) => { out += b.toString() })
  child.stderr.on('data', (b: Buffer) => { out += b.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)))
  assert.is(code, 0, out)
  const codes = JSON.parse(out.trim().split('\n').pop()!) as string[]
  assert.is(codes[0], `${ErrorCodes.NOT_FOUND}:cwd`)
  assert.is(codes[1], `${ErrorCodes.INVALID_ARGUMENT}:maxOutputBytes`)
  assert.ok(codes.slice(2).every((c) => c.startsWith(ErrorCodes.SANDBOX_GONE)), out)
  assert.ok(codes.length >= 3, out)
}))

ctest('spawn(...).wait() resolves whether or not anyone reads the output', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'big-wait')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  // More than the node holds for one command (4 MiB) and the SDK pulls unasked (4 MiB): the
  // command blocks on write until someone reads, so wait() can only answer once it is read...
  const small = sb.spawn('head -c 100000 /dev/zero; echo done >&2')
  const r = await small.wait()
  assert.is(r.exitCode, 0)
  // ...but one whose output fits answers with nobody reading, and the output is still there.
  let bytes = 0
  for await (const c of small) bytes += c.data.byteLength
  assert.is(bytes, 100_000 + 5)
  const quiet = sb.spawn(['sh', '-c', 'exit 4'])
  assert.is((await quiet.wait()).exitCode, 4)
  // A command that ends leaving more than the SDK buffers unasked (4 MiB) still on the node:
  // wait() learns its end by a status read instead of waiting for someone to read (it hung).
  const six = 6 * 1024 * 1024
  const over = sb.spawn(`head -c ${six} /dev/zero; exit 3`)
  assert.is((await over.wait()).exitCode, 3)
  let overBytes = 0
  for await (const c of over) overBytes += c.data.byteLength
  assert.is(overBytes, six, 'every byte is still there to read after wait()')
  assert.ok(isWarrenError(await sb.spawn('true', { cwd: '/nope' }).wait().catch((e: unknown) => e), ErrorCodes.NOT_FOUND))
}))

test.run()
