/**
 * The page's routes on the control plane's port (headers, what is and is not served), and the
 * `cluster-stats` request the page reads: admin only, its one field bounded.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { SESSION_ADDRESS, startNode, type ClusterStats } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { createLinkClient, type LinkClient } from '../../src/transport/index.js'
import { connect } from '../../src/sdk/index.js'
import { createPageRoutes, PAGE_CSP } from '../../src/web/page-routes.js'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

const httpOf = (ws: string): string => ws.replace(/^ws/, 'http')

async function refusal (link: LinkClient, body: unknown): Promise<WarrenError> {
  try {
    const v = await link.request(SESSION_ADDRESS, body, { timeoutMs: 10_000 })
    throw new Error(`${JSON.stringify(body)} was accepted: ${JSON.stringify(v).slice(0, 200)}`)
  } catch (err) {
    if (!isWarrenError(err)) throw err
    return err
  }
}

test('the control plane serves the built page with a strict CSP; nothing else under /ui/', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const base = httpOf(cp.url)
  const root = await fetch(`${base}/`, { redirect: 'manual' })
  assert.is(root.status, 302)
  assert.is(root.headers.get('location'), '/ui/')
  const page = await fetch(`${base}/ui/`)
  assert.is(page.status, 200)
  assert.is(page.headers.get('content-security-policy'), PAGE_CSP)
  assert.ok(PAGE_CSP.includes("script-src 'self'") && !PAGE_CSP.includes('unsafe'))
  assert.is(page.headers.get('x-content-type-options'), 'nosniff')
  assert.is(page.headers.get('x-frame-options'), 'DENY')
  const html = await page.text()
  assert.match(html, /<script type="module" src="app.js"><\/script>/)
  assert.not.match(html, /<script>/) // no inline script
  const js = await fetch(`${base}/ui/app.js`)
  assert.is(js.status, 200)
  assert.match(js.headers.get('content-type') ?? '', /^text\/javascript/)
  const etag = js.headers.get('etag')!
  assert.is((await fetch(`${base}/ui/app.js`, { headers: { 'if-none-match': etag } })).status, 304)
  assert.is((await fetch(`${base}/ui/app.css`)).status, 200)
  for (const p of ['/ui/../package.json', '/ui/%2e%2e/package.json', '/ui/tsconfig.json', '/ui/app.ts', '/ui/constructor', '/ui/__proto__']) {
    const r = await fetch(`${base}${p}`)
    assert.ok(r.status === 404 || r.status === 401, `${p}: ${r.status}`)
    await r.text()
  }
  const post = await fetch(`${base}/ui/`, { method: 'POST', body: 'x' })
  assert.is(post.status, 405)
  const head = await fetch(`${base}/ui/`, { method: 'HEAD' })
  assert.is(head.status, 200)
  assert.is(await head.text(), '')
  // The blob store's routes are still the blob store's.
  assert.is((await fetch(`${base}/blobs/sha256/${'0'.repeat(64)}`)).status, 401)
}))

test('a page not built is a 404 saying so, and is found once built', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-page-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const routes = createPageRoutes(dir)
  const server: Server = createServer((req, res) => { if (!routes.handle(req, res)) res.writeHead(418).end() })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const missing = await fetch(`${base}/ui/`)
  assert.is(missing.status, 404)
  assert.match(await missing.text(), /npm run build/)
  writeFileSync(join(dir, 'index.html'), '<!doctype html>')
  assert.is(await (await fetch(`${base}/ui/`)).text(), '<!doctype html>')
  assert.is((await fetch(`${base}/other`)).status, 418)
  assert.is((await fetch(`${base}/uix`)).status, 418)
}))

test('cluster-stats: nodes with capacity and use, layer figures and creations; admin only; windowSec bounded', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'stats-n1', functionsDir })
  defer(() => node.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('admin', ['admin']) })
  defer(() => admin.close())
  const tenant = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => tenant.close())
  await tenant.create({ backend: 'function', labels: { k: 'v' } })
  await tenant.createMany(2, { backend: 'function' })

  const stats = await admin.clusterStats(60)
  assert.is(stats.creations.length, 60)
  assert.is(stats.creations.reduce((a, p) => a + p.created, 0), 3)
  assert.ok(stats.creations.some((p) => p.p50 !== undefined && p.p50 > 0))
  const n = stats.nodes.find((x) => x.id === 'stats-n1')!
  assert.ok(n.alive)
  assert.ok(n.capacity.cpus > 0)
  assert.is(n.usage.sandboxes.function, 3)
  assert.is(stats.nodesOmitted, 0)
  assert.type(stats.layers.distinct, 'number')
  assert.is((await admin.clusterStats()).creations.length, 600)

  // A tenant's key (every tenant scope) may not read the cluster's figures.
  const forbidden = await tenant.clusterStats().catch((e: unknown) => e)
  assert.ok(isWarrenError(forbidden, ErrorCodes.FORBIDDEN))
  assert.is(forbidden.details?.scope, 'admin')

  const link = createLinkClient({ url: cp.url, token: await cp.createToken('admin', ['admin']) })
  defer(() => link.close())
  await link.connect()
  for (const windowSec of [0, 601, -1, 1.5, '60', null, 2 ** 60]) {
    const err = await refusal(link, { type: 'cluster-stats', windowSec })
    assert.is(err.code, ErrorCodes.INVALID_ARGUMENT, String(windowSec))
    assert.is(err.details?.field, 'windowSec')
  }
  const edge = await link.request<ClusterStats>(SESSION_ADDRESS, { type: 'cluster-stats', windowSec: 1 }, { timeoutMs: 10_000 })
  assert.is(edge.creations.length, 1)
  const top = await link.request<ClusterStats>(SESSION_ADDRESS, { type: 'cluster-stats', windowSec: 600, extra: 'ignored' }, { timeoutMs: 10_000 })
  assert.is(top.creations.length, 600)
}))

test('an admin reads another tenant\'s sandboxes and trajectories by naming it; no other key may', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tenant-n1', functionsDir })
  defer(() => node.close())
  const admin = createLinkClient({ url: cp.url, token: await cp.createToken('admin', ['admin']) })
  defer(() => admin.close())
  await admin.connect()
  const t1 = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => t1.close())
  const t2 = createLinkClient({ url: cp.url, token: await cp.createToken('t2', [...ALL_SCOPES]) })
  defer(() => t2.close())
  await t2.connect()
  const sb = await t1.create({ backend: 'function', labels: { who: 't1' } })
  await sb.exec(['js', 'console.log(1)'])

  const ask = <T>(link: LinkClient, body: unknown): Promise<T> => link.request<T>(SESSION_ADDRESS, body, { timeoutMs: 10_000 })
  assert.equal((await ask<Array<{ id: string }>>(admin, { type: 'list' })).map((v) => v.id), [])
  assert.equal((await ask<Array<{ id: string }>>(admin, { type: 'list', tenant: 't1' })).map((v) => v.id), [sb.id])
  const page = await ask<{ header?: { sandboxId: string }, steps: unknown[] }>(admin, { type: 'trajectory', id: sb.id, tenant: 't1' })
  assert.is(page.header?.sandboxId, sb.id)
  assert.ok(page.steps.length >= 1)
  // Without the tenant it is not the admin tenant's: NOT_FOUND, as for anyone else.
  assert.is((await refusal(admin, { type: 'trajectory', id: sb.id })).code, ErrorCodes.NOT_FOUND)
  assert.is((await refusal(admin, { type: 'trajectory-blob', id: sb.id, tenant: 't1', digest: `sha256:${'0'.repeat(64)}`, offset: 0, length: 1 })).code, ErrorCodes.NOT_FOUND)

  // Another tenant's key naming t1: FORBIDDEN (admin), for every read; its own name is its own.
  for (const body of [{ type: 'list', tenant: 't1' }, { type: 'trajectory', id: sb.id, tenant: 't1' }, { type: 'trajectory-blob', id: sb.id, tenant: 't1', digest: `sha256:${'0'.repeat(64)}`, offset: 0, length: 1 }]) {
    const err = await refusal(t2, body)
    assert.is(err.code, ErrorCodes.FORBIDDEN, body.type)
    assert.is(err.details?.scope, 'admin')
  }
  assert.equal(await ask(t2, { type: 'list', tenant: 't2' }), [])
  for (const tenant of ['', 'x'.repeat(257), 5, null, ['t1'], { t: 1 }]) {
    const err = await refusal(admin, { type: 'list', tenant })
    assert.is(err.code, ErrorCodes.INVALID_ARGUMENT)
    assert.is(err.details?.field, 'tenant')
  }
  assert.equal(await ask(admin, { type: 'list', tenant: 'x'.repeat(256) }), [])
}))

test.run()
