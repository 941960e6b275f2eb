import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { buildLayerFromDir, digestFile } from '../../src/images/index.js'
import { timed } from '../support/index.js'

test('the same tree builds to the same digest; a changed file changes it', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-layer-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'etc'), { recursive: true })
  writeFileSync(join(tree, 'etc', 'hello'), 'hello\n')
  symlinkSync('hello', join(tree, 'etc', 'link'))
  const a = await buildLayerFromDir(tree, join(dir, 'store'))
  const b = await buildLayerFromDir(tree, join(dir, 'store2'))
  assert.match(a.digest, /^sha256:[0-9a-f]{64}$/)
  assert.is(a.digest, b.digest)
  assert.is(await digestFile(a.path), a.digest)
  writeFileSync(join(tree, 'etc', 'hello'), 'changed\n')
  const c = await buildLayerFromDir(tree, join(dir, 'store'))
  assert.is.not(c.digest, a.digest)
}))

test.run()
