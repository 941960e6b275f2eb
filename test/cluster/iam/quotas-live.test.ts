/**
 * Quotas applied live on a real cluster (control plane here, one `warren node` child): a set
 * through the SDK takes effect at the tenant's next create, lowered or raised, without a restart,
 * and sandboxes running over a lowered maximum keep running.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { connect } from '../../../src/sdk/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from '../harness.js'
import { timed } from '../../support/index.js'

test('quota set, then create refused and allowed as the quotas say; running sandboxes keep running', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-quotas-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, 'q1', join(dir, 'node'))
  defer(() => node.kill())
  const root = await connect({ url: cp.url, token: (await cp.adminKey()).token! })
  defer(() => root.close())
  const user = await connect({ url: cp.url, token: await root.createToken('q', [...ALL_SCOPES]) })
  defer(() => user.close())

  await root.setQuotas('q', { maxSandboxes: 2 })
  const running = await user.createMany(2, { backend: 'function', ttlMs: 60_000 })
  const over = await user.create({ backend: 'function' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(over, ErrorCodes.QUOTA) && over.details?.quota === 'concurrent', String(over))

  await root.setQuotas('q', { maxSandboxes: 3 })
  const third = await user.create({ backend: 'function', ttlMs: 60_000 })
  assert.is(third.state, 'ready')

  // Lowered under what runs: the next create is refused at once, the three run on.
  await root.setQuotas('q', { maxSandboxes: 1 })
  const refused = await user.create({ backend: 'function' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(refused, ErrorCodes.QUOTA), String(refused))
  for (const sb of [...running, third]) {
    assert.is((await user.attach(sb.id)).state, 'ready')
    const r = await sb.exec(['js', 'console.log(6*7)'], { timeoutMs: 5000 })
    assert.is(r.stdout, '42\n', JSON.stringify(r))
  }

  // A rate of one create in a burst of one: the second in a row waits; raised, it does not.
  await third.kill()
  await running[0]!.kill()
  await running[1]!.kill()
  await root.setQuotas('q', { maxSandboxes: 10, createsPerSecond: 0.001, createBurst: 1 })
  await (await user.create({ backend: 'function' })).kill()
  const rate = await user.create({ backend: 'function' }).catch((e: unknown) => e)
  assert.ok(isWarrenError(rate, ErrorCodes.QUOTA) && rate.details?.quota === 'rate', String(rate))
  await root.setQuotas('q', { createsPerSecond: 100, createBurst: 10 })
  await (await user.create({ backend: 'function' })).kill()
}))

test.run()
