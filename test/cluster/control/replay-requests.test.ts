/**
 * The shape of `replay` and `restore` as they come off the wire, and what a client cannot put in
 * any request: the internal `unrecorded` flag of a restore's commands and file changes, and the
 * internal `symlink` file op, are never parsed into what reaches a sandbox.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseClientRequest } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'

function refusedField (body: unknown): string | undefined {
  try {
    parseClientRequest(body)
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
    return (err.details as { field?: string } | undefined)?.field
  }
  assert.unreachable(`accepted ${JSON.stringify(body)}`)
  return undefined
}

test('replay takes id, upTo, compare and a spec of labels and ttlMs; restore takes id', () => {
  assert.equal(parseClientRequest({ type: 'replay', id: 'abc', extra: 1 }), { type: 'replay', id: 'abc' })
  assert.equal(parseClientRequest({ type: 'replay', id: 'abc', upTo: 0, compare: 'exit', spec: { labels: { run: '2' }, ttlMs: 60_000 } }),
    { type: 'replay', id: 'abc', upTo: 0, compare: 'exit', spec: { labels: { run: '2' }, ttlMs: 60_000 } })
  assert.equal(parseClientRequest({ type: 'replay', id: 'abc', compare: 'output', spec: {} }), { type: 'replay', id: 'abc', compare: 'output', spec: {} })
  assert.equal(parseClientRequest({ type: 'restore', id: 'abc', upTo: 3 }), { type: 'restore', id: 'abc' })
})

test('garbage in a replay or restore is refused naming the field', () => {
  const cases: Array<[unknown, string]> = [
    [{ type: 'replay' }, 'id'], [{ type: 'replay', id: '' }, 'id'], [{ type: 'replay', id: 'x'.repeat(65) }, 'id'], [{ type: 'replay', id: 7 }, 'id'],
    [{ type: 'replay', id: 'a', upTo: -1 }, 'upTo'], [{ type: 'replay', id: 'a', upTo: 1.5 }, 'upTo'], [{ type: 'replay', id: 'a', upTo: '3' }, 'upTo'],
    [{ type: 'replay', id: 'a', compare: 'bytes' }, 'compare'], [{ type: 'replay', id: 'a', compare: 1 }, 'compare'],
    [{ type: 'replay', id: 'a', spec: 'x' }, 'spec'], [{ type: 'replay', id: 'a', spec: [] }, 'spec'],
    [{ type: 'replay', id: 'a', spec: { image: { base: 'busybox' } } }, 'spec.image'],
    [{ type: 'replay', id: 'a', spec: { env: { A: '1' } } }, 'spec.env'],
    [{ type: 'replay', id: 'a', spec: { deterministic: true } }, 'spec.deterministic'],
    [{ type: 'replay', id: 'a', spec: { ttlMs: 0 } }, 'spec.ttlMs'], [{ type: 'replay', id: 'a', spec: { ttlMs: 8 * 24 * 3_600_000 } }, 'spec.ttlMs'],
    [{ type: 'replay', id: 'a', spec: { labels: { a: 1 } } }, 'spec.labels.a'], [{ type: 'replay', id: 'a', spec: { labels: 'x' } }, 'spec.labels'],
    [{ type: 'restore' }, 'id'], [{ type: 'restore', id: null }, 'id']
  ]
  for (const [body, field] of cases) {
    assert.is(refusedField(body), field, JSON.stringify(body))
  }
})

test('a client\'s unrecorded on an exec or a file request is dropped, and it cannot ask for the internal symlink op', () => {
  const exec = parseClientRequest({ type: 'exec', id: 'a', execId: 'e', argv: ['true'], unrecorded: true, opts: { unrecorded: true } })
  assert.equal(exec, { type: 'exec', id: 'a', execId: 'e', argv: ['true'], opts: {} })
  const files = parseClientRequest({ type: 'files', id: 'a', op: 'mkdir', path: '/d', unrecorded: true })
  assert.equal(files, { type: 'files', id: 'a', req: { op: 'mkdir', path: '/d' } })
  assert.is(refusedField({ type: 'files', id: 'a', op: 'symlink', path: '/l', target: '/etc' }), 'op')
})

test.run()
