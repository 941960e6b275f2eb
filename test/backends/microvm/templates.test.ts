/**
 * The template store's bound never drops a template from under its build (a finding: a second
 * shape's first create evicted the first one's directory while it was being saved); what it
 * hands out has its RAM sealed. Its RAM is bounded in bytes too (a finding: one create of a
 * 20,000 MiB VM left 21.6 GB of the host pinned by its shape's template after it was killed).
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
  const a = store.get('a', 1, build(aMayFinish)).then((t) => t!)
  const b = (await store.get('b', 1, build()))!
  assert.ok(existsSync(b.stateFile))
  finishA()
  const made = await a
  assert.ok(existsSync(made.stateFile) && made.ram.sealed, 'a was made whole, not dropped while being made')
  assert.is(fstatSync(made.ram.fd).size, 1024 * 1024)
  assert.throws(() => writeSync(made.ram.fd, 'x', 0), /EPERM/, 'a made template\'s RAM is sealed')
  // Now made, the older one goes when a third comes.
  const c = (await store.get('c', 1, build()))!
  assert.ok(existsSync(c.stateFile))
  assert.is(store.size, 1)
  assert.not.ok(existsSync(made.stateFile) && existsSync(b.stateFile), 'the bound holds once nothing is being made')
}))

rtest('the RAM templates hold together is bounded: a shape larger than the bound is never saved, and the least recently used go past it', timed(20_000, async (defer) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'warren-tpl-')), 'store')
  const store = createTemplateStore(dir, 10, 3)
  defer(() => store.close())
  let built = 0
  const build = async (parts: { ram: GuestRam, stateFile: string }): Promise<void> => { built++; writeFileSync(parts.stateFile, 'state') }
  assert.is(await store.get('huge', 4, build), undefined, 'past the bound alone: no template')
  assert.is(built, 0, 'and nothing booted to make one')
  const a = (await store.get('a', 2, build))!
  const b = (await store.get('b', 1, build))!
  assert.is(store.size, 2)
  await store.get('c', 2, build)
  assert.is(store.size, 2, '2 + 1 + 2 MiB is past 3: a, the least recently used, went')
  assert.not.ok(existsSync(a.stateFile))
  assert.ok(existsSync(b.stateFile))
}))

test.run()
