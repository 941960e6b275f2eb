/**
 * A resumable command's output journal: read back after a restart, it gives its step the chunks
 * below the consumer's seq, once, and goes on from there; bounded by a cut.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { OutputJournal } from '../../../src/cluster/trajectory/output-journal.js'
import { timed } from '../../support/index.js'

const text = (xs: Array<{ stream: string, data: Uint8Array }> | undefined): string[] | undefined => xs?.map((x) => `${x.stream}:${new TextDecoder().decode(x.data)}`)
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

test('reopened from a seq: the chunks wholly below it, once; the file cut there and appended after', timed(5000, (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-journal-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'sb.3.out')
  const j = OutputJournal.create(path, 1 << 20)
  j.write({ first: 0, end: 1 }, 'stdout', bytes('a'))
  j.write({ first: 1, end: 2 }, 'stderr', bytes('b'))
  j.write({ first: 2, end: 4 }, 'stdout', bytes('cc')) // a chunk of two seqs
  j.write({ first: 4, end: 5 }, 'stdout', bytes('d'))
  // The consumer had seqs below 3: the two-seq chunk is not wholly below, so it comes again from the agent.
  const again = OutputJournal.reopen(path, 3, 1 << 20)
  assert.equal(text(again.kept), ['stdout:a', 'stderr:b'])
  again.journal.write({ first: 3, end: 4 }, 'stdout', bytes('x'))
  const third = OutputJournal.reopen(path, 10, 1 << 20)
  assert.equal(text(third.kept), ['stdout:a', 'stderr:b', 'stdout:x'], 'what was after the cut is gone, what came after is there')
  third.journal.remove()
  assert.not.ok(existsSync(path))
  // Nothing there: nothing kept, a fresh journal.
  assert.is(OutputJournal.reopen(path, 5, 1 << 20).kept, undefined)
}))

test('bounded: past maxBytes a cut ends it, and a cut journal gives nothing back', timed(5000, (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-journal-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'sb.1.out')
  const j = OutputJournal.create(path, 10)
  for (let i = 0; i < 100; i++) j.write({ first: i, end: i + 1 }, 'stdout', bytes('0123'))
  assert.ok(statSync(path).size < 200, `bounded: ${statSync(path).size} bytes`)
  assert.is(OutputJournal.reopen(path, 50, 10).kept, undefined)
}))

test.run()
