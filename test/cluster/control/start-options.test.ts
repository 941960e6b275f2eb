/**
 * Options `startControlPlane` cannot run with are refused up front with the public code naming
 * what is wrong, before any actor starts: never the internal "the gateway has stopped".
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startControlPlane } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'

test('inconsistent link options and a malformed join token are INVALID_ARGUMENT, not ACTOR_STOPPED', timed(20_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cp-opts-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const refusal = async (o: Parameters<typeof startControlPlane>[0]): Promise<unknown> => {
    try {
      const cp = await startControlPlane({ port: 0, dataDir: join(dir, 'cp'), ...o })
      await cp.close()
      return 'started'
    } catch (err) { return err }
  }
  const low = await refusal({ link: { lowWaterMark: 100, highWaterMark: 10 } })
  assert.ok(isWarrenError(low, ErrorCodes.INVALID_ARGUMENT), String(low))
  assert.equal((low as { details?: { problems?: string[] } }).details?.problems, ['lowWaterMark > highWaterMark'])
  const sockets = await refusal({ link: { maxSockets: 0 } })
  assert.ok(isWarrenError(sockets, ErrorCodes.INVALID_ARGUMENT), String(sockets))
  const join_ = await refusal({ joinToken: 'wrnj_short' })
  assert.ok(isWarrenError(join_, ErrorCodes.INVALID_ARGUMENT) && join_.details?.field === 'joinToken', String(join_))
}))

test.run()
