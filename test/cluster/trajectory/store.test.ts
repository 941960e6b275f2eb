import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { encodeValue, parseSandboxSpec, TrajectoryStore, type LogRecord, type ShipBatch, type Step } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { openState } from '../../../src/state/index.js'

const spec = parseSandboxSpec({})
const header = (id: string, tenant = 't', createdAt = 1000): LogRecord => ({ t: 'header', header: { sandboxId: id, tenant, node: 'n', createdAt, spec, layers: [] } })
const exec = (seq: number, final: boolean, extra: Partial<Extract<Step, { kind: 'exec' }>> = {}): LogRecord =>
  ({ t: 'step', final, step: { seq, at: 2000 + seq, kind: 'exec', execId: `e${seq}`, argv: ['x'], ...(final ? { endedAt: 3000, exitCode: 0 } : {}), ...extra } })
const batch = (id: string, first: number, records: LogRecord[]): ShipBatch => ({ type: 'append', nodeId: 'n', logs: [{ sandboxId: id, first, records: records.map((r) => encodeValue(r)) }] })
const blob = (c: string): string => `sha256:${c.repeat(64)}`

function fresh (): { s: TrajectoryStore, close: () => void } {
  const state = openState(undefined)
  return { s: new TrajectoryStore(state.db), close: () => state.close() }
}

test('batches are stored idempotently: records sent again change nothing, and a begun record never undoes a final one', () => {
  const { s, close } = fresh()
  const records = [header('a'), exec(0, false), exec(0, true), exec(1, false)]
  assert.equal(s.append(batch('a', 0, records)), { acks: [{ sandboxId: 'a', upTo: 3 }] })
  assert.equal(s.append(batch('a', 0, records)), { acks: [{ sandboxId: 'a', upTo: 3 }] }, 'the same again')
  s.append(batch('a', 1, [exec(0, false)]))
  const page = s.read('t', 'a', 0)
  assert.is((page.steps[0] as Extract<Step, { kind: 'exec' }>).exitCode, 0, 'still the final record')
  assert.equal(page.steps.map((x) => x.seq), [0, 1])
  assert.is(page.nextSeq, 2)
  assert.is(page.header?.sandboxId, 'a')
  assert.is(s.read('t', 'a', 1).header, undefined, 'the header comes with seq 0 only')
  close()
})

test('complete once the end arrived and every step before it is final, in whatever order they came', () => {
  const { s, close } = fresh()
  s.append(batch('a', 0, [header('a'), exec(0, false), { t: 'end', at: 5000, nextSeq: 2 }]))
  assert.is(s.read('t', 'a', 0).complete, false)
  s.append(batch('a', 3, [exec(1, true), exec(0, true)]))
  assert.is(s.read('t', 'a', 0).complete, true)
  s.append(batch('a', 5, [{ t: 'continue', at: 6000, nextSeq: 2 }]))
  assert.is(s.read('t', 'a', 0).complete, false, 'made again: going on')
  assert.is(s.nextSeq('a'), 2)
  assert.is(s.nextSeq('never'), 0)
  close()
})

test('reads page within their bounds and stop before a seq not stored yet', () => {
  const { s, close } = fresh()
  const many = Array.from({ length: 250 }, (_, i) => exec(i, true))
  s.append(batch('a', 0, [header('a'), ...many.filter((_, i) => i !== 230)]))
  const first = s.read('t', 'a', 0)
  assert.is(first.steps.length, 200, 'at most 200 a page')
  const second = s.read('t', 'a', first.nextSeq)
  assert.equal([second.steps[0]!.seq, second.nextSeq], [200, 230], 'stops at the gap')
  assert.equal(s.read('t', 'a', 230).steps, [])
  assert.is(s.read('t', 'a', 0, 5).steps.length, 5)
  const big = new Uint8Array(300 * 1024)
  s.append(batch('b', 0, [header('b'), ...[0, 1, 2, 3].map((i) => exec(i, true, { stdout: { bytes: big.length, sha256: 'x', data: big } }))]))
  const bounded = s.read('t', 'b', 0)
  assert.is(bounded.steps.length, 2, 'about 768 KiB a page')
  assert.is(s.read('t', 'b', 0, 200, 100).steps.length, 1, 'one step at least, whatever its size')
  close()
})

test('another tenant\'s trajectory is NOT_FOUND like one that never was; a blob is readable only as its trajectory references it', () => {
  const { s, close } = fresh()
  s.append(batch('a', 0, [header('a'), exec(0, true, { stdout: { bytes: 1, sha256: 'x', blob: blob('a') } })]))
  for (const err of [() => s.read('u', 'a', 0), () => s.read('t', 'zz', 0)]) {
    try { err(); assert.unreachable() } catch (e) { assert.ok(isWarrenError(e, ErrorCodes.NOT_FOUND)) }
  }
  s.checkBlob('t', 'a', blob('a'))
  for (const [tenant, digest] of [['u', blob('a')], ['t', blob('b')]] as const) {
    try { s.checkBlob(tenant, 'a', digest); assert.unreachable() } catch (e) { assert.ok(isWarrenError(e, ErrorCodes.NOT_FOUND), String(e)) }
  }
  close()
})

test('the sweep forgets trajectories past their retention, and names the blobs no trajectory references any more', () => {
  const { s, close } = fresh()
  const withBlobs = (id: string, digests: string[]): ShipBatch => batch(id, 0, [header(id), ...digests.map((d, i) => exec(i, true, { stdout: { bytes: 1, sha256: 'x', blob: d } })), { t: 'end', at: 10_000, nextSeq: digests.length }])
  s.append(withBlobs('old', [blob('a'), blob('b')]))
  s.append(withBlobs('keep', [blob('b')]))
  s.append(batch('keep', 9, [{ t: 'end', at: 50_000, nextSeq: 1 }]))
  s.append(batch('live', 0, [header('live', 't', 1000)]))
  const swept = s.sweep(20_000, 0)
  assert.equal(swept, { deleted: 1, orphans: [blob('a')] }, 'b is still referenced')
  try { s.read('t', 'old', 0); assert.unreachable() } catch (e) { assert.ok(isWarrenError(e, ErrorCodes.NOT_FOUND)) }
  assert.is(s.read('t', 'live', 0).steps.length, 0, 'a live one stays')
  assert.equal(s.sweep(60_000, 2000).orphans, [blob('b')])
  assert.equal(s.sweep(60_000, 2000).deleted, 0)
  close()
})

test('records a node could not have meant are skipped, and still acknowledged', () => {
  const { s, close } = fresh()
  const b: ShipBatch = { type: 'append', nodeId: 'n', logs: [{ sandboxId: 'a', first: 0, records: [encodeValue(header('a')), new Uint8Array([0xc1]), encodeValue({ t: 'step', step: { seq: -1 } }), encodeValue(exec(0, true))] }] }
  assert.equal(s.append(b), { acks: [{ sandboxId: 'a', upTo: 3 }] })
  assert.equal(s.read('t', 'a', 0).steps.map((x) => x.seq), [0])
  s.append(batch('nobody', 0, [exec(0, true)]))
  try { s.read('t', 'nobody', 0); assert.unreachable() } catch (e) { assert.ok(isWarrenError(e, ErrorCodes.NOT_FOUND), 'steps without a header go nowhere') }
  close()
})

test('each tenant\'s bytes are counted as steps are stored: a step stored again counts its difference, a blob once, and a reopened store reads the same totals', () => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tbytes-'))
  try {
    let state = openState(dir)
    let s = new TrajectoryStore(state.db)
    const stdout = { bytes: 5000, sha256: 'x', blob: blob('a') }
    s.append(batch('a', 0, [header('a'), exec(0, false)]))
    const begun = s.bytesOf('t')
    assert.ok(begun > 0 && begun < 200, `the begun step: ${begun}`)
    s.append(batch('a', 2, [exec(0, true, { stdout })]))
    const final = s.bytesOf('t')
    assert.ok(final > 5000 && final < 5000 + 300, `the final step replaces the begun one and adds its blob: ${final}`)
    s.append(batch('a', 2, [exec(0, true, { stdout })]))
    s.append(batch('a', 1, [exec(0, false)]))
    assert.is(s.bytesOf('t'), final, 'sent again, or older: no change')
    s.append(batch('b', 0, [header('b', 'u'), exec(0, true)]))
    assert.is(s.bytesOf('t'), final, 'another tenant\'s count is its own')
    const other = s.bytesOf('u')
    state.close()
    state = openState(dir)
    s = new TrajectoryStore(state.db)
    assert.equal([s.bytesOf('t'), s.bytesOf('u')], [final, other], 'read back from the rows')
    state.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('trim forgets a tenant\'s oldest ended trajectories until it is within its limit, never a live one nor another tenant\'s', () => {
  const { s, close } = fresh()
  const big = new Uint8Array(10_000)
  const ended = (id: string, at: number, tenant = 't'): void => {
    s.append(batch(id, 0, [header(id, tenant), exec(0, true, { stdout: { bytes: big.length, sha256: 'x', data: big } }), { t: 'end', at, nextSeq: 1 }]))
  }
  ended('old', 1000)
  ended('mid', 2000)
  ended('new', 3000)
  ended('theirs', 500, 'u')
  s.append(batch('live', 0, [header('live'), exec(0, true, { stdout: { bytes: big.length, sha256: 'x', data: big } })]))
  const each = s.bytesOf('u')
  assert.equal(s.tenantsOver(() => 2 * each), ['t'])
  assert.equal(s.trim('t', 2 * each), { deleted: 2, orphans: [] })
  const gone = (id: string): boolean => { try { s.read('t', id, 0); return false } catch (e) { return isWarrenError(e, ErrorCodes.NOT_FOUND) } }
  assert.equal(['old', 'mid', 'new', 'live'].map(gone), [true, true, false, false], 'the oldest ended went first')
  assert.is(s.trim('t', 0).deleted, 1, 'down to the live one, which stays')
  assert.ok(!gone('live') && s.bytesOf('t') > 0)
  assert.is(s.read('u', 'theirs', 0).steps.length, 1)
  close()
})

test.run()
