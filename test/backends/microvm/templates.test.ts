/**
 * The template store's bound never drops a template from under its build (a finding: a second
 * shape's first create evicted the first one's directory while it was being saved); what it
 * hands out has its RAM sealed.
 */
import { existsSync, fstatSync, mkdtempSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createTemplateStore, type GuestRam } from '../../../src/backends/microvm/index.js'
import { timed } from '../../support/index.js'

const rtest = process.getuid?.() === 0 ? test : test.skip

rtest('past the bound, the least recently used that is made goes; one still being made stays', timed(20_000, async (defer) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'warren-tpl-')), 'store')
  const store = createTemplateStore(dir, 1)
  defer(() => store.close())
  let finishA!: () => void
  const aMayFinish = new Promise<void>((resolve) => { finishA = resolve })
  const build = (gate?: Promise<void>) => async (parts: { ram: GuestRam, stateFile: string }): Promise<void> => {
    assert.not.ok(parts.ram.sealed, 'the build writes it')
    writeSync(parts.ram.fd, 'ram', 0)
    await gate
    writeFileSync(parts.stateFile, 'state')
  }
  const a = store.get('a', 1, build(aMayFinish))
  const b = await store.get('b', 1, build())
  assert.ok(existsSync(b.stateFile))
  finishA()
  const made = await a
  assert.ok(existsSync(made.stateFile) && made.ram.sealed, 'a was made whole, not dropped while being made')
  assert.is(fstatSync(made.ram.fd).size, 1024 * 1024)
  assert.throws(() => writeSync(made.ram.fd, 'x', 0), /EPERM/, 'a made template\'s RAM is sealed')
  // Now made, the older one goes when a third comes.
  const c = await store.get('c', 1, build())
  assert.ok(existsSync(c.stateFile))
  assert.is(store.size, 1)
  assert.not.ok(existsSync(made.stateFile) && existsSync(b.stateFile), 'the bound holds once nothing is being made')
}))

test.run()
