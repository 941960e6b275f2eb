/**
 * The admin requests' bounded fields as they come off the wire: each bounded integer
 * (cluster-stats windowSec, token-list and audit-query limit, fork count, a terminal's cols and
 * rows) is refused the same
 * way whichever way it misses (0, negative, fraction, NaN, a string, past the bound), naming its
 * field and giving the range; within the range it is taken as sent.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseClientRequest, RequestLimits } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'

const cases: Array<{ type: string, field: string, max: number, extra?: Record<string, unknown> }> = [
  { type: 'cluster-stats', field: 'windowSec', max: 600 },
  { type: 'token-list', field: 'limit', max: 1000 },
  { type: 'audit-query', field: 'limit', max: 1000 },
  { type: 'fork', field: 'count', max: 1000, extra: { id: 'abc' } },
  // A terminal's size: -1 was told 'must be >= 0', and 0 then refused as well.
  { type: 'exec-resize', field: 'cols', max: RequestLimits.maxTerminalCells, extra: { id: 'abc', execId: 'e1', rows: 24 } },
  { type: 'exec-resize', field: 'rows', max: RequestLimits.maxTerminalCells, extra: { id: 'abc', execId: 'e1', cols: 80 } }
]

test('each bounded integer is refused with one message naming its field and range, however it misses', () => {
  for (const c of cases) {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5', null, c.max + 1, 1e12]) {
      try {
        parseClientRequest({ type: c.type, ...c.extra, [c.field]: bad })
        assert.unreachable(`${c.type} took ${c.field}=${String(bad)}`)
      } catch (err) {
        assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
        assert.is((err.details as { field?: string }).field, c.field)
        assert.is(err.message, `${c.field} must be an integer from 1 to ${c.max}`)
      }
    }
    for (const good of [1, c.max]) {
      const r = parseClientRequest({ type: c.type, ...c.extra, [c.field]: good }) as unknown as Record<string, unknown>
      const got = c.type === 'audit-query' ? (r.query as Record<string, unknown>)[c.field] : r[c.field]
      assert.is(got, good, `${c.type} ${c.field}=${good}`)
    }
  }
})

test.run()
