import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Trajectory } from '../../src/cluster/index.js'

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

test('each command is an entry: argv, how it ended, the head of each stream and the whole byte counts', () => {
  const t = new Trajectory({ maxEntries: 10, maxOutputBytes: 8, maxPage: 10 })
  const a = t.begin('e1', ['echo', 'hi'])
  a.output('stdout', bytes('hello '))
  a.output('stdout', bytes('world, and more'))
  a.output('stderr', bytes('oops'))
  a.stdin(5)
  const running = t.read().entries[0]!
  assert.is(running.endedAt, undefined, 'a running command is there already')
  a.end({ exitCode: 3, durationMs: 1, truncated: false, reason: 'timeout' })
  const [e] = t.read().entries
  assert.equal(e!.argv, ['echo', 'hi'])
  assert.is(e!.exitCode, 3)
  assert.is(e!.reason, 'timeout')
  assert.is(e!.stdout, 'hello wo', 'the head, capped')
  assert.is(e!.stdoutBytes, 21, 'every byte counted')
  assert.is(e!.stderr, 'oops')
  assert.is(e!.stdinBytes, 5)
})

test('bounded: the oldest entries go and are counted; reading pages on from nextSeq', () => {
  const t = new Trajectory({ maxEntries: 3, maxOutputBytes: 8, maxPage: 2 })
  for (let i = 0; i < 5; i++) t.begin(`e${i}`, [`c${i}`]).end({ exitCode: 0, durationMs: 0, truncated: false })
  const first = t.read(0)
  assert.equal(first.entries.map((e) => e.seq), [2, 3])
  assert.is(first.dropped, 2)
  const second = t.read(first.nextSeq)
  assert.equal(second.entries.map((e) => e.argv[0]), ['c4'])
  const third = t.read(second.nextSeq)
  assert.equal(third.entries, [])
  assert.is(third.nextSeq, 5)
})

test.run()
