/**
 * The snapshot commands end to end, against `warren up` (container sandboxes): snapshot with a
 * name, create --snapshot by it, snapshots, fork, hibernate and resume, snapshot-rm, and their
 * refusals.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { timed } from '../support/index.js'
import { warren, warrenUp } from './support.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`cli snapshot tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('warren snapshot, create --snapshot, snapshots, fork, hibernate, resume and snapshot-rm', timed(180_000, async (defer) => {
  const { env } = await warrenUp(defer)
  const w = async (args: string[], status = 0): Promise<string> => {
    const r = await warren(args, { env, timeoutMs: 120_000 })
    assert.is(r.status, status, `warren ${args.join(' ')}: ${r.stderr}`)
    return r.stdout
  }
  const id = (await w(['create', '--backend', 'container', '--label', 'cli=snap'])).trim()
  await w(['exec', id, '--', 'sh', '-c', 'echo saved > /saved'])
  const snap = (await w(['snapshot', id, '--name', 'cli:v1'])).trim()
  assert.match(snap, /^snap-[0-9a-z]{16}$/)
  const made = (await w(['create', '--snapshot', 'cli:v1', '--label', 'from=snap'])).trim()
  assert.is(await w(['exec', made, '--', 'cat', '/saved']), 'saved\n')
  const listed = await w(['snapshots', '--sandbox', id])
  assert.match(listed, new RegExp(`^ID\\s+NAME\\s+SANDBOX\\s+LAYERS\\s+BYTES\\s+AGE\\s+PARENT\\n${snap}\\s+cli:v1\\s+${id}\\s+2\\s+\\d+\\s+\\d+s\\s+-\\n$`))
  const forks = (await w(['fork', id, '2', '--label', 'fork=1'])).trim().split('\n')
  assert.is(forks.length, 2)
  for (const f of forks) assert.is(await w(['exec', f, '--', 'cat', '/saved']), 'saved\n')
  assert.match(await w(['hibernate', made]), /^snap-[0-9a-z]{16}\n$/)
  assert.match(await w(['ps', '--state', 'hibernated']), new RegExp(`${made}\\s+hibernated`))
  assert.is(await w(['resume', made]), `${made}\tready\n`)
  assert.is(await w(['exec', made, '--', 'cat', '/saved']), 'saved\n')
  assert.is(await w(['snapshot-rm', 'cli:v1']), `${snap}\n`)
  const gone = await warren(['create', '--snapshot', 'cli:v1'], { env })
  assert.is(gone.status, 1)
  assert.match(gone.stderr, /WARREN_ERR_BAD_SPEC/)
  const both = await warren(['create', '--snapshot', snap, '--image', 'busybox'], { env })
  assert.is(both.status, 1)
  assert.match(both.stderr, /--snapshot or --image/)
  const badN = await warren(['fork', id, 'many'], { env })
  assert.is(badN.status, 1)
  assert.match(badN.stderr, /N must be a whole number/)
  await w(['kill', id, made, ...forks])
}))

test.run()
