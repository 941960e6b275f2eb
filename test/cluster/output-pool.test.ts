/**
 * The node's output buffer and its credit: what a command may hold, what the node holds in all,
 * who waits when it is full, and that reading gives the space back.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ExecOutput, OutputPool } from '../../src/cluster/index.js'
import { timed } from '../support/index.js'

const KiB = 1024
const limits = { execBufferBytes: 100 * KiB, nodeBufferBytes: 250 * KiB, minWindowBytes: 10 * KiB, minWindowReserveBytes: 20 * KiB }

/** A producer that sends exactly its credit, as the agent does. */
function producer (pool: OutputPool): { output: ExecOutput, granted: () => number, send: (n: number) => void } {
  const credit = pool.openExec()
  const output = new ExecOutput(credit)
  let granted = credit.windowBytes
  credit.onGrant((n) => { granted += n })
  return {
    output,
    granted: () => granted,
    send (n) {
      assert.ok(n <= granted, `sending ${n} with ${granted} granted`)
      granted -= n
      output.append('stdout', new Uint8Array(n))
    }
  }
}

test('a command holds at most its window; reading frees it and credit comes back', timed(5000, async () => {
  const pool = new OutputPool(limits)
  const p = producer(pool)
  assert.is(p.granted(), 100 * KiB)
  p.send(100 * KiB)
  assert.is(p.granted(), 0, 'no credit while the buffer is full')
  assert.is(pool.total, 100 * KiB)
  const page = await p.output.read(0, 60 * KiB, 0)
  const read = page.chunks.reduce((n, c) => n + c.data.byteLength, 0)
  await p.output.read(page.nextSeq, 1, 0) // asking from nextSeq acknowledges the page
  assert.is(p.granted(), read, 'what was read is granted again')
  assert.is(pool.total, 100 * KiB)
  p.output.finish({ exitCode: 0, durationMs: 1, truncated: false })
  assert.is(pool.total, 100 * KiB - read, 'unused credit goes back when the command ends')
  p.output.dispose()
  assert.is(pool.total, 0, 'and all of it when the output is dropped')
}))

test('a full node gives newcomers only the minimum window, out of its reserve, then nothing; freed space goes first to who holds least', timed(5000, async () => {
  const pool = new OutputPool(limits)
  const a = producer(pool)
  const b = producer(pool)
  a.send(100 * KiB)
  b.send(100 * KiB)
  const c = producer(pool)
  assert.is(c.granted(), 50 * KiB, 'what the node has left')
  c.send(50 * KiB)
  const d = producer(pool)
  assert.is(d.granted(), 10 * KiB, 'the minimum window, from the reserve')
  const e = producer(pool)
  assert.is(e.granted(), 10 * KiB)
  const f = producer(pool)
  assert.is(f.granted(), 0, 'the reserve is spent too: it waits from the start')
  assert.ok(pool.total <= limits.nodeBufferBytes + limits.minWindowReserveBytes)

  // `a` is read: its space goes first to `f` (holding nothing), then to `c` (50 KiB), not back to `a` alone.
  const page = await a.output.read(0, 100 * KiB, 0)
  await a.output.read(page.nextSeq, 1, 0)
  assert.ok(f.granted() > 0, 'the starved newcomer is served')
  assert.ok(c.granted() > 0, 'then the one holding less')
  assert.ok(pool.total <= limits.nodeBufferBytes + limits.minWindowReserveBytes)
  for (const p of [a, b, c, d, e, f]) p.output.dispose()
  assert.is(pool.total, 0)
}))

test('an output that cannot be paused reserves its cap whole, and is refused when the node cannot hold it', timed(5000, async () => {
  const pool = new OutputPool(limits)
  const r1 = pool.reserve(100 * KiB)
  const r2 = pool.reserve(100 * KiB)
  assert.ok(r1 !== undefined && r2 !== undefined)
  assert.is(pool.reserve(100 * KiB), undefined, 'over the node total')
  const small = pool.reserve(50 * KiB)
  assert.ok(small !== undefined)
  assert.is(pool.total, 250 * KiB)
  const out = new ExecOutput(r1)
  out.append('stdout', new Uint8Array(30 * KiB))
  out.finish({ exitCode: 0, durationMs: 1, truncated: false })
  assert.is(pool.total, 180 * KiB, 'what it did not use is given back when it ends')
  out.dispose()
  r2!.close()
  small!.close()
  assert.is(pool.total, 0)
}))

test('a large write is kept as chunks of at most 64 KiB, so a page fits a frame', timed(5000, async () => {
  const out = new ExecOutput()
  out.append('stdout', new Uint8Array(200 * KiB))
  const page = await out.read(0, 1024 * KiB, 0)
  assert.is(page.chunks.length, 4)
  assert.ok(page.chunks.every((c) => c.data.byteLength <= 64 * KiB))
}))

test.run()
