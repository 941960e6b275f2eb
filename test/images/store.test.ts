import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { LayerStore } from '../../src/images/index.js'
import { timed } from '../support/index.js'

test('a node\'s layer store builds no layer from a host directory or a Debian suite, whatever a create names', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-store-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const store = new LayerStore(dir)
  for (const ref of ['dir:/etc', 'dir:relative', 'debian:bookworm', 'debian:bookworm:python3', 'sha256:../../etc', `sha256:${'A'.repeat(64)}`, '/etc', 'file:///etc', '']) {
    const err = await store.resolve(ref).then(() => undefined, (e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.BAD_SPEC), `${JSON.stringify(ref)}: ${String(err)}`)
  }
  assert.equal(readdirSync(dir), [], 'nothing was built')
}))

test.run()
