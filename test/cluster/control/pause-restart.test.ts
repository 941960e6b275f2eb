/**
 * A paused sandbox across restarts: the node agent killed with SIGKILL and started again adopts
 * it still frozen (its record comes back paused, not ready), and a control plane that lost its
 * records rebuilds it as paused from the node's summary. Either way it resumes and runs on.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { connect } from '../../../src/sdk/index.js'
import { timed, waitFor } from '../../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from '../harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`pause restart tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('kill -9 the node agent of a paused sandbox, restart it: adopted still paused, then resumed, its work intact', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-pr-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const first = await spawnNode(cp, 'pr1', join(dir, 'node'))
  defer(() => first.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', limits: { cpus: 0.5, memoryMiB: 128 } })
  defer(() => sb.kill())
  await sb.exec('echo kept > /tmp/state')
  await sb.pause()

  await first.kill('SIGKILL')
  await waitFor(() => sb.state === 'lost', 10_000, 'lost with its node')
  const second = await spawnNode(cp, 'pr1', join(dir, 'node'))
  defer(() => second.kill())
  await waitFor(() => sb.state === 'paused', 20_000, 'paused again once re-adopted')
  assert.is((await sb.info()).state, 'paused')
  const refused = await sb.exec('true').catch((e: unknown) => e)
  assert.ok(isWarrenError(refused, ErrorCodes.SANDBOX_PAUSED), String(refused))
  assert.is((await sb.resume()).state, 'ready')
  assert.is((await sb.exec('cat /tmp/state')).stdout, 'kept\n')
}))

test.run()
