/**
 * Finding 10: one bad message ended a session. A tenant on a raw authenticated link sends tells
 * and requests the SDK never would; every request is answered with a public error naming the
 * field, every tell is dropped, and the same connection keeps working afterwards.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { SESSION_ADDRESS, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { createLinkClient, type LinkClient } from '../../src/transport/index.js'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

/** Codes of the actor kernel and the transport's own plumbing: never a tenant's answer. */
const INTERNAL_CODES = new Set<string>([
  ErrorCodes.ACTOR_STOPPED, ErrorCodes.ACTOR_FAILED, ErrorCodes.NO_SUCH_ACTOR, ErrorCodes.ASK_TIMEOUT,
  ErrorCodes.DUPLICATE_NAME, ErrorCodes.SUPERVISOR_INTENSITY, ErrorCodes.INTERNAL
])

/** A control plane, a function node in this process, and a raw link with a tenant key. */
async function rawSession (defer: (fn: () => unknown) => void): Promise<LinkClient> {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'sec10', functionsDir })
  defer(() => node.close())
  const link = createLinkClient({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => link.close())
  await link.connect()
  return link
}

/** The request's rejection; fails the test if it was answered with a value. */
async function refusal (link: LinkClient, body: unknown): Promise<WarrenError> {
  try {
    const value = await link.request(SESSION_ADDRESS, body, { timeoutMs: 10_000 })
    throw new Error(`${JSON.stringify(body)?.slice(0, 200)} was accepted: ${JSON.stringify(value)?.slice(0, 200)}`)
  } catch (err) {
    if (!isWarrenError(err)) throw err
    return err
  }
}

/** A good request: a function sandbox runs a command and its output is read back. */
async function stillServes (link: LinkClient): Promise<void> {
  const view = await link.request<{ id: string }>(SESSION_ADDRESS, { type: 'create', spec: {} }, { timeoutMs: 10_000 })
  type Page = { chunks: Array<{ data: Uint8Array }>, nextSeq: number, result?: unknown }
  let page = await link.request<Page>(SESSION_ADDRESS, { type: 'exec', id: view.id, execId: 'good-1', argv: ['js', 'console.log(6*7)'] }, { timeoutMs: 10_000 })
  let out = ''
  for (;;) {
    out += page.chunks.map((c) => new TextDecoder().decode(c.data)).join('')
    if (page.result !== undefined) break
    page = await link.request<Page>(SESSION_ADDRESS, { type: 'read', id: view.id, execId: 'good-1', fromSeq: page.nextSeq, waitMs: 1000 }, { timeoutMs: 10_000 })
  }
  assert.is(out, '42\n')
}

test('a tell of an unknown type, and other broken tells, are dropped: the session still answers', timed(30_000, async (defer) => {
  const link = await rawSession(defer)
  for (const body of [{ type: 'no-such-type' }, null, 'hello', [1, 2], { type: 'kill' }, { type: 'nodes' }, { type: 'info', id: 7 }, { type: 'x'.repeat(200_000) }]) {
    link.tell(SESSION_ADDRESS, body)
  }
  await stillServes(link)
}))

test('every field of every request, wrong-typed or missing, is refused naming the field; the session lives on', timed(60_000, async (defer) => {
  const link = await rawSession(defer)
  const e = { id: 'sb1', execId: 'e1' }
  const cases: Array<[unknown, string]> = [
    [null, 'type'], ['hello', 'type'], [[1, 2], 'type'], [{}, 'type'], [{ type: 5 }, 'type'], [{ type: 'no-such-type' }, 'type'],
    // A client does not speak for the directory.
    [{ type: 'sandbox-state', id: 'sb1', state: 'gone' }, 'type'],
    [{ type: 'create', count: 'two' }, 'count'], [{ type: 'create', count: 1.5 }, 'count'], [{ type: 'create', deadlineMs: 'soon' }, 'deadlineMs'],
    [{ type: 'info' }, 'id'], [{ type: 'info', id: 42 }, 'id'], [{ type: 'info', id: 'x'.repeat(500_000) }, 'id'],
    [{ type: 'list', labels: 'a' }, 'labels'], [{ type: 'list', labels: { a: 1 } }, 'labels.a'], [{ type: 'list', state: 7 }, 'state'],
    [{ type: 'list', state: 'sleeping' }, 'state'], [{ type: 'list', limit: -1 }, 'limit'], [{ type: 'list', limit: 'all' }, 'limit'],
    [{ type: 'kill', id: null }, 'id'], [{ type: 'kill' }, 'id'], [{ type: 'kill', ids: [] }, 'ids'], [{ type: 'kill', ids: 'sb1' }, 'ids'],
    [{ type: 'kill', ids: ['sb1', null] }, 'ids.1'], [{ type: 'kill', ids: Array.from({ length: 1001 }, () => 'sb1') }, 'ids'],
    [{ type: 'kill', labels: {} }, 'labels'], [{ type: 'kill', labels: { a: 'x\0' } }, 'labels.a'], [{ type: 'kill', id: 'sb1', labels: { a: 'b' } }, 'labels'],
    [{ type: 'set-ttl', id: 'sb1' }, 'ttlMs'], [{ type: 'set-ttl', id: 'sb1', ttlMs: 0 }, 'ttlMs'], [{ type: 'set-ttl', id: 'sb1', ttlMs: 'long' }, 'ttlMs'],
    [{ type: 'set-ttl', ttlMs: 1000 }, 'id'], [{ type: 'list', all: 'yes' }, 'all'],
    [{ type: 'exec', id: 'sb1', execId: 5, argv: ['js'] }, 'execId'], [{ type: 'exec', ...e }, 'argv'], [{ type: 'exec', ...e, argv: 'js' }, 'argv'],
    [{ type: 'exec', ...e, argv: [1] }, 'argv'], [{ type: 'exec', ...e, argv: ['js'], opts: 'fast' }, 'opts'],
    [{ type: 'exec', ...e, argv: ['js'], opts: { timeoutMs: 'long' } }, 'opts.timeoutMs'],
    [{ type: 'exec', ...e, argv: ['js'], opts: { maxOutputBytes: -5 } }, 'opts.maxOutputBytes'],
    [{ type: 'exec', ...e, argv: ['js'], opts: { env: { A: 1 } } }, 'opts.env.A'], [{ type: 'exec', ...e, argv: ['js'], opts: { env: [] } }, 'opts.env'],
    [{ type: 'exec', ...e, argv: ['js'], opts: { env: { 'A=B': 'x' } } }, 'opts.env.A=B'], [{ type: 'exec', ...e, argv: ['js'], opts: { env: { A: 'x\0y' } } }, 'opts.env.A'],
    [{ type: 'list', labels: { a: 'x\0' } }, 'labels.a'],
    [{ type: 'exec', ...e, argv: ['js'], opts: { stdin: 'text' } }, 'opts.stdin'], [{ type: 'exec', ...e, argv: ['js'], opts: { openStdin: 1 } }, 'opts.openStdin'],
    [{ type: 'read', ...e }, 'fromSeq'], [{ type: 'read', ...e, fromSeq: '0' }, 'fromSeq'], [{ type: 'read', ...e, fromSeq: 0, maxBytes: 'all' }, 'maxBytes'],
    [{ type: 'read', ...e, fromSeq: 0, waitMs: {} }, 'waitMs'], [{ type: 'read', id: 'sb1', fromSeq: 0 }, 'execId'],
    [{ type: 'exec-kill', id: 'sb1', execId: [] }, 'execId'],
    [{ type: 'stdin', ...e, offset: -1 }, 'offset'], [{ type: 'stdin', ...e, offset: 0, data: 'str' }, 'data'], [{ type: 'stdin', ...e, offset: 0, eof: 'yes' }, 'eof'],
    [{ type: 'trajectory', id: 'sb1', fromSeq: 'a' }, 'fromSeq'], [{ type: 'trajectory', id: 'sb1', limit: 1e20 }, 'limit'], [{ type: 'trajectory', id: 'sb1', limit: 0 }, 'limit'],
    [{ type: 'trajectory', id: 7 }, 'id'], [{ type: 'trajectory-blob', id: 'sb1', digest: 'sha256:xyz', offset: 0, length: 1 }, 'digest'],
    [{ type: 'trajectory-blob', id: 'sb1', digest: `sha256:${'a'.repeat(64)}`, offset: -1, length: 1 }, 'offset'],
    [{ type: 'trajectory-blob', id: 'sb1', digest: `sha256:${'a'.repeat(64)}`, offset: 0, length: 0 }, 'length'],
    [{ type: 'trajectory-blob', id: 'sb1', digest: `sha256:${'a'.repeat(64)}`, offset: 0, length: 2 * 1024 * 1024 }, 'length'],
    [{ type: 'files', id: 'sb1', op: 'delete', path: '/x' }, 'op'], [{ type: 'files', id: 'sb1', op: 'read', path: 5 }, 'path'],
    [{ type: 'files', id: 'sb1', op: 'write-chunk', upload: 'u', offset: 0, data: 5 }, 'data'], [{ type: 'files', id: 'sb1', op: 'read' }, 'path'],
    [{ type: 'files', id: 'sb1', op: 'read', path: '/x', offset: -1, length: 1 }, 'offset'], [{ type: 'files', id: 'sb1', op: 'read', path: '/x', offset: 0 }, 'length'],
    [{ type: 'files', id: 'sb1', op: 'write-begin', path: '/x' }, 'upload'], [{ type: 'files', id: 'sb1', op: 'write-begin', upload: 'u', path: '/x', size: 'big' }, 'size'],
    [{ type: 'files', id: 'sb1', op: 'write-begin', upload: 'u', path: '/x', format: 'zip' }, 'format'], [{ type: 'files', id: 'sb1', op: 'mkdir', path: '/x', mode: 0o70000 }, 'mode'],
    [{ type: 'files', id: 'sb1', op: 'write-end', upload: 'u', size: 1, sha256: 'f'.repeat(65) }, 'sha256'], [{ type: 'files', id: 'sb1', op: 'rename', path: '/x' }, 'to'],
    [{ type: 'files', id: 'sb1', op: 'tar-read', download: 'd', seq: 1.5 }, 'seq'],
    [{ type: 'files', id: 'sb1', op: 'read', path: '/tmp/a\0b', offset: 0, length: 1 }, 'path'], [{ type: 'files', id: 'sb1', op: 'rename', path: '/a', to: '/b\0' }, 'to'],
    [{ type: 'files', id: 'sb1', op: 'stat', path: 'é'.repeat(4000) }, 'path'], [{ type: 'files', id: 'sb1', op: 'write-chunk', upload: 'x'.repeat(65), offset: 0, data: new Uint8Array(1) }, 'upload']
  ]
  for (const [body, field] of cases) {
    const err = await refusal(link, body)
    const shown = JSON.stringify(body)?.slice(0, 120)
    assert.is(err.code, ErrorCodes.INVALID_ARGUMENT, `${shown}: ${err.code} ${err.message}`)
    assert.is(err.details?.field, field, `${shown}: field ${String(err.details?.field)} (${err.message})`)
  }
  // Admin requests from a tenant key: refused for the scope, whatever their fields.
  for (const body of [{ type: 'token-create', tenant: 5, scopes: 'all' }, { type: 'nodes' }, { type: 'image-tag', name: 1 }, { type: 'token-list', limit: -1 }, { type: 'token-revoke', id: 7 }, { type: 'admin-rotate' }, { type: 'tenant-quotas', tenant: 'tenant-a', quotas: { maxSandboxes: 1e9 } }]) {
    const err = await refusal(link, body)
    assert.ok(err.code === ErrorCodes.FORBIDDEN || err.code === ErrorCodes.INVALID_ARGUMENT, `${JSON.stringify(body)}: ${err.code}`)
  }
  await stillServes(link)
}))

/** mulberry32: a small seeded generator, so a failing run can be replayed exactly. */
function seeded (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

test('fuzz: 600 seeded random bodies as tells and requests; each request is answered with a public code, and the session still serves', timed(120_000, async (defer) => {
  const link = await rawSession(defer)
  const random = seeded(0xC0FFEE)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!
  const types = ['create', 'info', 'list', 'kill', 'exec', 'read', 'exec-kill', 'stdin', 'trajectory', 'trajectory-blob', 'files', 'token-create', 'token-list', 'token-revoke', 'admin-rotate', 'nodes', 'image-tag', 'image-list', 'sandbox-state', 'bogus', '__proto__', 'constructor']
  const fields = ['id', 'execId', 'argv', 'opts', 'fromSeq', 'maxBytes', 'waitMs', 'offset', 'data', 'eof', 'limit', 'labels', 'state', 'op', 'path', 'count', 'deadlineMs', 'spec', 'tenant', 'scopes', 'expiresInMs', 'after', 'name', 'digest', 'kind', 'length', '__proto__']
  const values = (): unknown => pick<() => unknown>([
    () => null, () => true, () => -1, () => 0, () => 1.5, () => 2 ** 53, () => Number.NaN, () => Infinity, () => '', () => 'x',
    () => 'y'.repeat(Math.floor(random() * 100_000)), () => [], () => [1, 'a', null], () => ({}), () => ({ a: 1, b: { c: [2] } }),
    () => new Uint8Array(Math.floor(random() * 1000)), () => ({ timeoutMs: 'x', env: { A: 1 } }), () => ['js', 'console.log(1)'], () => 'read'
  ])()
  for (let i = 0; i < 600; i++) {
    const body: Record<string, unknown> = random() < 0.9 ? { type: pick(types) } : {}
    const n = Math.floor(random() * 6)
    // defineProperty, so a field named __proto__ is a field on the wire, not this object's prototype.
    for (let j = 0; j < n; j++) Object.defineProperty(body, pick(fields), { value: values(), enumerable: true, writable: true, configurable: true })
    const sent = random() < 0.05 ? values() : body
    if (random() < 0.3) {
      link.tell(SESSION_ADDRESS, sent)
      continue
    }
    try {
      await link.request(SESSION_ADDRESS, sent, { timeoutMs: 10_000 })
    } catch (err) {
      assert.ok(isWarrenError(err), `request ${i}: not a warren error: ${String(err)}`)
      assert.not.ok(INTERNAL_CODES.has(err.code), `request ${i} (${JSON.stringify(sent)?.slice(0, 200)}): ${err.code} ${err.message}`)
    }
  }
  await stillServes(link)
}))

test.run()
