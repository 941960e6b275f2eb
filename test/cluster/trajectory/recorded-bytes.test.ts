import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { BytesRecorder, RecordBudget, RecordPushDefaults, TrajectoryDefaults, type PushBlob } from '../../../src/cluster/index.js'
import { createError, ErrorCodes } from '../../../src/errors.js'
import { timed } from '../../support/index.js'

const limits = { inlineBytes: 16, headBytes: 4, tailBytes: 4 }
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')
const bytes = (n: number, seed = 0): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) % 251)

/** A spill directory and a blob store standing in for the control plane's: a push copies the file there. */
function fixture (defer: (fn: () => unknown) => void): { spill: () => string, push: PushBlob, pushed: Map<string, Buffer>, dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rb-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  let n = 0
  const pushed = new Map<string, Buffer>()
  return {
    dir,
    spill: () => join(dir, `spill-${++n}`),
    pushed,
    push: async (file) => {
      const data = readFileSync(file)
      const digest = `sha256:${sha(data)}`
      copyFileSync(file, join(dir, `blob-${n}`))
      pushed.set(digest, data)
      return { digest, bytes: data.length }
    }
  }
}

test('bytes within the inline bound are kept inline, whole, with their count and sha256', timed(5000, async (defer) => {
  const f = fixture(defer)
  const r = new BytesRecorder(new RecordBudget(1000), f.spill, limits)
  const all = bytes(12)
  r.write(all.subarray(0, 5))
  r.write(all.subarray(5))
  const got = await r.finish(f.push)
  assert.equal({ ...got, data: [...got.data!] }, { bytes: 12, sha256: sha(all), data: [...all] })
  assert.equal(f.pushed.size, 0)
}))

test('beyond the inline bound the bytes stream to a file, are pushed when the stream ends, and the file goes', timed(5000, async (defer) => {
  const f = fixture(defer)
  const budget = new RecordBudget(1000)
  const r = new BytesRecorder(budget, f.spill, limits)
  const all = bytes(100)
  for (let at = 0; at < all.length; at += 9) r.write(all.subarray(at, at + 9))
  const got = await r.finish(f.push)
  assert.is(got.blob, `sha256:${sha(all)}`)
  assert.is(got.sha256, sha(all))
  assert.is(got.data, undefined)
  assert.equal([...f.pushed.get(got.blob!)!], [...all], 'the blob holds every byte')
  assert.not.ok(readdirSync(f.dir).some((n) => n.startsWith('spill-')), 'the spill file is removed')
  assert.is(budget.used, 100, 'kept whole: the budget counts it')
}))

test('past the sandbox budget only head and tail are kept, with the count and the sha256 of everything; the budget is given back', timed(5000, async (defer) => {
  const f = fixture(defer)
  const budget = new RecordBudget(50)
  const small = new BytesRecorder(budget, f.spill, limits)
  small.write(bytes(10))
  const big = new BytesRecorder(budget, f.spill, limits)
  const all = bytes(200, 3)
  for (let at = 0; at < all.length; at += 7) big.write(all.subarray(at, at + 7))
  const got = await big.finish(f.push)
  assert.is(got.bytes, 200)
  assert.is(got.sha256, sha(all))
  assert.equal([...got.head!], [...all.subarray(0, 4)])
  assert.equal([...got.tail!], [...all.subarray(196)])
  assert.is(got.data, undefined)
  assert.is(got.blob, undefined)
  assert.is(budget.used, 10, 'only the small stream still holds budget')
  assert.equal((await small.finish(f.push)).bytes, 10)
  assert.not.ok(readdirSync(f.dir).some((n) => n.startsWith('spill-')), 'no spill file left')
}))

test('a push the store refuses for good leaves head and tail; a stream given up records nothing and frees its budget', timed(5000, async (defer) => {
  const f = fixture(defer)
  const budget = new RecordBudget(1000)
  const r = new BytesRecorder(budget, f.spill, limits)
  r.write(bytes(40))
  const refused: PushBlob = async () => { throw createError(ErrorCodes.UNSUPPORTED, 'no blob store') }
  const got = await r.finish(refused)
  assert.is(got.bytes, 40)
  assert.ok(got.head !== undefined && got.blob === undefined && got.data === undefined)
  assert.is(budget.used, 0)
  const given = new BytesRecorder(budget, f.spill, limits)
  given.write(bytes(30))
  assert.is(budget.used, 30)
  given.discard()
  assert.is(budget.used, 0)
  assert.not.ok(readdirSync(f.dir).some((n) => n.startsWith('spill-')))
  assert.ok(RecordPushDefaults.attempts >= 1 && TrajectoryDefaults.inlineBytes === 64 * 1024)
  assert.not.ok(existsSync(join(f.dir, 'spill-1')))
}))

test('toBlob pushes even bytes that would fit inline (a step that would not fit a page otherwise)', timed(5000, async (defer) => {
  const f = fixture(defer)
  const r = new BytesRecorder(new RecordBudget(1000), f.spill, limits)
  r.write(bytes(8))
  const got = await r.finish(f.push, true)
  assert.is(got.blob, `sha256:${sha(bytes(8))}`)
}))

test.run()
