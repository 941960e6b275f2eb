/**
 * A hibernated sandbox is on no node, so no node reports it after a control-plane restart: its
 * record is kept in the state database, and it resumes after the restart with its files.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { connect } from '../../../src/sdk/index.js'
import { timed } from '../../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from '../harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`hibernated-restart tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('a hibernated sandbox outlives a control-plane restart: listed hibernated, then resumed with its files; a killed one stays gone', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-hib-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp1 = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  let cp1Open = true
  defer(() => cp1Open ? cp1.close() : undefined)
  const node1 = await spawnNode(cp1, 'hib1', join(dir, 'node'))
  defer(() => node1.kill())
  const c1 = await connect({ url: cp1.url, token: await cp1.createToken('t', [...ALL_SCOPES]) })
  const sb = await c1.create({ backend: 'container' })
  await sb.files.write('/work/kept.txt', 'across the restart')
  await sb.hibernate()
  const killed = await c1.create({ backend: 'container' })
  await killed.hibernate()
  await c1.kill([killed.id])
  await c1.close()

  const port = Number(new URL(cp1.url).port)
  await cp1.close()
  cp1Open = false
  await node1.kill('SIGKILL')
  const cp2 = await startTestControlPlane({ dataDir: join(dir, 'cp'), port })
  defer(() => cp2.close())
  const node2 = await spawnNode(cp2, 'hib1', join(dir, 'node'))
  defer(() => node2.kill())
  const c2 = await connect({ url: cp2.url, token: await cp2.createToken('t', [...ALL_SCOPES]) })
  defer(() => c2.close())

  assert.equal((await c2.list({ state: 'hibernated' })).map((v) => v.id), [sb.id], 'the hibernated one is back, the killed one is not')
  const again = await c2.attach(sb.id)
  assert.is(again.state, 'ready')
  assert.is(new TextDecoder().decode(await again.files.read('/work/kept.txt')), 'across the restart')
  assert.equal((await c2.list({ state: 'hibernated' })).length, 0)
  await again.kill()
}))

test.run()
