/**
 * The template store's bound never drops a template from under its build (a finding: a second
 * shape's first create evicted the first one's directory while it was being saved).
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createTemplateStore } from '../../../src/backends/microvm/index.js'
import { timed } from '../../support/index.js'

const rtest = process.getuid?.() === 0 ? test : test.skip

rtest('past the bound, the least recently used that is made goes; one still being made stays', timed(20_000, async (defer) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'warren-tpl-')), 'store')
  const store = createTemplateStore(dir, 1)
  defer(() => store.close())
  let finishA!: () => void
  const aMayFinish = new Promise<void>((resolve) => { finishA = resolve })
  const build = (gate?: Promise<void>) => async (files: { memoryFile: string, stateFile: string }): Promise<void> => {
    writeFileSync(files.memoryFile, 'ram')
    await gate
    writeFileSync(files.stateFile, 'state')
  }
  const a = store.get('a', build(aMayFinish))
  const b = await store.get('b', build())
  assert.ok(existsSync(b.stateFile))
  finishA()
  const made = await a
  assert.ok(existsSync(made.stateFile) && existsSync(made.memoryFile), 'a was made whole, not dropped while being made')
  // Now made, the older one goes when a third comes.
  const c = await store.get('c', build())
  assert.ok(existsSync(c.stateFile))
  assert.is(store.size, 1)
  assert.not.ok(existsSync(made.stateFile) && existsSync(b.stateFile), 'the bound holds once nothing is being made')
}))

test.run()
