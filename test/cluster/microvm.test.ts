import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { release, tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { MicrovmDefaults, microvmUnavailable } from '../../src/backends/microvm/index.js'
import { connect } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from './harness.js'

// The guest kernel is kept between runs, shared with the backend's own tests.
const GUEST_DIR = '/var/tmp/warren-test-guest'
process.env.WARREN_GUEST_DIR = GUEST_DIR
const why = microvmUnavailable(GUEST_DIR)
if (why !== undefined) console.log(`microvm cluster tests skipped: ${why}`)
const vtest = why === undefined ? test : test.skip

vtest('a microvm sandbox through the SDK and a real node: uname -r is the guest kernel, files, kill reclaims the VM', timed(150_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-vmc-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, 'vmn1', join(dir, 'node'))
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]), requestTimeoutMs: 90_000 })
  defer(() => client.close())

  const sb = await client.create({ backend: 'microvm', limits: { cpus: 1, memoryMiB: 256, diskMiB: 64 } })
  const r = await sb.exec(['uname', '-r'])
  assert.is(r.exitCode, 0)
  assert.match(r.stdout, /-cloud-amd64\n$/)
  assert.is.not(r.stdout.trim(), release(), 'not the host kernel')
  assert.is((await sb.exec(['hostname'])).stdout, `${sb.id}\n`)
  await sb.files.write('/root/a.txt', 'from the SDK')
  assert.is((await sb.exec(['cat', '/root/a.txt'])).stdout, 'from the SDK')

  const runDir = join(MicrovmDefaults.runDir, 'vmn1')
  assert.ok(existsSync(join(runDir, sb.id)), 'its host directory while it runs')
  await sb.kill()
  await waitFor(() => sb.state === 'gone', 20_000, 'gone')
  await waitFor(() => !existsSync(join(runDir, sb.id)), 20_000, 'its host directory removed')
  await node.kill('SIGTERM')
  assert.ok(!existsSync(runDir) || readdirSync(runDir).length === 0, 'run directory emptied')
}))

test.run()
