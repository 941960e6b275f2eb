/**
 * The window in which a sandbox's node is away (src/cluster/control/rejoin.ts): reads of a lost
 * durable sandbox, or of one whose trajectory is open though the directory does not know it,
 * answer a retryable BACKEND_UNAVAILABLE; another tenant's id, or a finished one, answers as
 * a missing one does.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { encodeValue, parseSandboxSpec, TrajectoryStore, type LogRecord, type ShipBatch } from '../../../src/cluster/index.js'
import { awaitsNode, unknownOrAway } from '../../../src/cluster/control/rejoin.js'
import type { SandboxRecord } from '../../../src/cluster/control/directory.js'
import { createError, ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { openState } from '../../../src/state/index.js'

const spec = parseSandboxSpec({})
const header = (id: string, tenant: string, createdAt: number): LogRecord => ({ t: 'header', header: { sandboxId: id, tenant, node: 'n', createdAt, spec, layers: [] } })
const batch = (id: string, records: LogRecord[]): ShipBatch => ({ type: 'append', nodeId: 'n', logs: [{ sandboxId: id, first: 0, records: records.map((r) => encodeValue(r)) }] })

test('a trajectory is open for its own tenant only, until it ends or could no longer be alive', () => {
  const state = openState(undefined)
  try {
    const s = new TrajectoryStore(state.db)
    const now = Date.now()
    s.append(batch('a', [header('a', 't1', now - 1000)]))
    s.append(batch('b', [header('b', 't1', now - 1000), { t: 'end', at: now, nextSeq: 0 }]))
    s.append(batch('c', [header('c', 't1', now - 365 * 24 * 3600_000)]))
    assert.is(s.isOpen('t1', 'a', now), true)
    assert.is(s.isOpen('t2', 'a', now), false, "another tenant's sandbox is not open to it")
    assert.is(s.isOpen('t1', 'b', now), false, 'ended')
    assert.is(s.isOpen('t1', 'c', now), false, 'older than any sandbox lives')
    assert.is(s.isOpen('t1', 'nope', now), false)
  } finally {
    state.close()
  }
})

test('an unknown id is away only when its trajectory is open; other errors pass through', async () => {
  const missing = createError(ErrorCodes.NOT_FOUND, 'no sandbox x')
  const away = await unknownOrAway(missing, 'x', async () => true)
  assert.ok(isWarrenError(away, ErrorCodes.BACKEND_UNAVAILABLE))
  assert.type((away as { details?: { retryAfterMs?: unknown } }).details?.retryAfterMs, 'number')
  assert.is(await unknownOrAway(missing, 'x', async () => false), missing)
  assert.is(await unknownOrAway(missing, 'x', async () => { throw new Error('store down') }), missing, 'a store that cannot say: missing')
  const forbidden = createError(ErrorCodes.FORBIDDEN, 'no')
  assert.is(await unknownOrAway(forbidden, 'x', async () => true), forbidden)
})

test('a lost sandbox waits for its node only on a backend whose sandboxes outlive it', () => {
  const r = (state: SandboxRecord['state'], backend: string): SandboxRecord => ({ state, backend } as unknown as SandboxRecord)
  assert.is(awaitsNode(r('lost', 'container')), true)
  assert.is(awaitsNode(r('lost', 'microvm')), true)
  assert.is(awaitsNode(r('lost', 'function')), false)
  assert.is(awaitsNode(r('gone', 'container')), false)
})

test.run()
