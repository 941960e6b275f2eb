/**
 * `warren replay` and `warren restore` end to end, against `warren up` (container sandboxes):
 * a replay prints the fresh sandbox, the steps applied and that nothing diverged; `--up-to`
 * stops there; a killed sandbox is restored under its id with its files; bad flags are refused.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { timed } from '../support/index.js'
import { warren, warrenUp } from './support.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`cli replay tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('warren replay, replay --up-to, and restore of a killed sandbox', timed(180_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const w = async (args: string[], status = 0): Promise<string> => {
    const r = await warren(args, { env, timeoutMs: 120_000 })
    assert.is(r.status, status, `warren ${args.join(' ')}: ${r.stdout}${r.stderr}`)
    return r.stdout
  }
  const id = (await w(['create', '--backend', 'container'])).trim()
  await w(['exec', id, '--', 'sh', '-c', 'mkdir -p /work && echo one > /work/a'])
  await w(['exec', id, '--', 'sh', '-c', 'echo two > /work/b; cat /work/a'])
  await w(['kill', id])
  const all = await w(['replay', id])
  const fresh = /^sandbox ([0-9a-z]{16})\n/.exec(all)?.[1]
  assert.ok(fresh !== undefined && fresh !== id, all)
  assert.is(all, `sandbox ${fresh}\nreplayed 2 steps\nno divergence\n`)
  assert.is(await w(['exec', fresh, '--', 'cat', '/work/a', '/work/b']), 'one\ntwo\n')
  const first = await w(['replay', id, '--up-to', '0', '--compare', 'exit'])
  const partial = /^sandbox ([0-9a-z]{16})\n/.exec(first)![1]!
  assert.match(first, /replayed 1 steps\nno divergence\n$/)
  assert.is((await warren(['exec', partial, '--', 'cat', '/work/b'], { env })).status, 1, 'nothing after seq 0')
  const restored = await w(['restore', id])
  assert.is(restored, `sandbox ${id} ready, from its recorded spec\nreplayed 2 steps\nno divergence\n`)
  assert.is(await w(['exec', id, '--', 'cat', '/work/a', '/work/b']), 'one\ntwo\n')
  const bad = await warren(['replay', id, '--compare', 'bytes'], { env })
  assert.is(bad.status, 1)
  assert.match(bad.stderr, /--compare must be exit or output/)
  const live = await warren(['restore', id], { env })
  assert.is(live.status, 1)
  assert.match(live.stderr, /WARREN_ERR_INVALID_ARGUMENT.*nothing to restore/)
  await w(['kill', id, fresh, partial])
}))

test.run()
