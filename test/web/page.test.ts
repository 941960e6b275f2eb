/**
 * The live page in a real browser: Debian's headless Chromium driven by playwright-core. A wrong
 * key is refused on the login form; the right one shows the node, a sandbox the SDK creates
 * appears in the list, and its trajectory shows the command and its output. The screenshot is
 * kept as test-artifacts/page.png. Every wait is on the DOM, none on the clock.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { chromium, type Browser, type Page } from 'playwright-core'
import { startNode } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { ALL_SCOPES, functionsDir, repoRoot, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

const CHROMIUM = '/usr/bin/chromium'
const ARTIFACTS = join(repoRoot, 'test-artifacts')

async function launch (defer: (fn: () => unknown) => void): Promise<Browser> {
  // As root Chromium needs --no-sandbox; the page is ours and the browser lives for one test.
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'], timeout: 30_000 })
  defer(() => browser.close())
  return browser
}

/** A page that records console errors and CSP violations, so the test can say there were none. */
async function openPage (browser: Browser, url: string, problems: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } })
  page.setDefaultTimeout(30_000)
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()) })
  page.on('pageerror', (e) => problems.push(String(e)))
  await page.goto(url)
  return page
}

async function logIn (page: Page, key: string): Promise<void> {
  await page.fill('#key', key)
  await page.click('#login')
}

test('log in, see a sandbox appear after a create, open its trajectory; a wrong key is refused', timed(240_000, async (defer) => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (scripts/setup.mjs installs it)`)
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-page-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  // A data dir, so output past 64 KiB goes to the blob store and the page reads it from there.
  const cp = await startTestControlPlane({ dataDir: join(dataDir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'page-n1', functionsDir, dataDir: join(dataDir, 'node') })
  defer(() => node.close())
  // The operator's key (what warren up prints): the cluster's figures, and any tenant's sandboxes by the picker.
  const pageKey = await cp.createToken('admin', ['admin'])
  const sdk = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => sdk.close())

  const browser = await launch(defer)
  const problems: string[] = []
  const page = await openPage(browser, `${cp.url.replace(/^ws/, 'http')}/`, problems)

  await logIn(page, 'wrn_not-a-key-of-this-cluster')
  await page.waitForSelector('#login-error')
  assert.match(await page.textContent('#login-error') ?? '', /refused/)
  assert.is(await page.evaluate("sessionStorage.getItem('warren.key')"), null)

  await logIn(page, pageKey)
  await page.waitForSelector('#live')
  await page.waitForSelector('tr[data-node-id="page-n1"]')
  assert.is(await page.evaluate("sessionStorage.getItem('warren.key')"), pageKey)
  assert.not.match(page.url(), /wrn_/) // the key is never in the URL

  const sb = await sdk.create({ backend: 'function', labels: { run: 'page-test' } })
  const row = `tr[data-sandbox-id="${sb.id}"]`
  await page.waitForSelector('#no-sandboxes') // the admin tenant has none
  await page.waitForSelector('#filter-tenant option[value="t1"]', { state: 'attached' })
  await page.selectOption('#filter-tenant', 't1')
  await page.waitForSelector(row)
  assert.match(await page.textContent(row) ?? '', /ready/)
  const r = await sb.exec(['js', 'console.log("hello from " + "the page test"); console.error("and its stderr")'], { timeoutMs: 10_000 })
  assert.is(r.exitCode, 0)
  const big = await sb.exec(['js', 'console.log("B".repeat(100000))'], { timeoutMs: 10_000 })
  assert.is(big.stdout.length, 100_001)
  const other = await sdk.create({ backend: 'function', labels: { run: 'other' } })

  await page.click(row)
  await page.waitForSelector('#trajectory .step-exec pre[data-stream="stdout"]')
  const traj = await page.textContent('#trajectory') ?? ''
  assert.match(traj, /\$ js 'console\.log/)
  assert.match(await page.textContent('#trajectory pre[data-stream="stdout"]') ?? '', /hello from the page test/)
  assert.match(await page.textContent('#trajectory pre[data-stream="stderr"]') ?? '', /and its stderr/)
  assert.match(traj, /exit 0/)
  // The big output is in the blob store: the page shows its first 64 KiB and says how much more.
  const bigOut = page.locator('#trajectory li[data-seq="1"] pre[data-stream="stdout"]', { hasText: 'more: warren log' })
  await bigOut.waitFor()
  assert.match(await bigOut.textContent() ?? '', /^B{65536}\n… \(33\.7 KiB more/)
  // The charts count the two creations.
  // (A locator, not waitForFunction: the page's CSP refuses the eval that would need.)
  await page.locator('#created-total', { hasText: /^2$/ }).waitFor()

  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: join(ARTIFACTS, 'page.png'), fullPage: true })

  // Filters are the server's: a label another sandbox has hides this one; state filters too.
  // Both rows are on the page before the filter: wait for the filtered answer to take this one away.
  await page.fill('#filter-labels', 'run=other')
  await page.locator(row).waitFor({ state: 'detached' })
  await page.waitForSelector(`tr[data-sandbox-id="${other.id}"]`)
  assert.is(await page.locator(row).count(), 0)
  assert.is(await page.locator('#sandboxes tbody tr').count(), 1)
  await page.fill('#filter-labels', 'run=page-test')
  await page.waitForSelector(row)
  await page.selectOption('#filter-state', 'paused')
  await page.waitForSelector('#no-sandboxes')
  await page.selectOption('#filter-state', 'live')
  await page.waitForSelector(row)

  // A kill is seen live (a notice, then the list).
  await sb.kill()
  await page.waitForSelector(row, { state: 'detached' })
  await page.selectOption('#filter-state', 'all')
  await page.waitForSelector(`${row} .state-gone`)

  await page.click('#logout')
  await page.waitForSelector('#key')
  assert.is(await page.evaluate("sessionStorage.getItem('warren.key')"), null)
  assert.equal(problems.filter((p) => !/status of 40[14]/.test(p)), [], 'no console error or CSP violation')
}))

test('a tenant key sees its sandboxes and no cluster figures; another tenant\'s sandboxes never show', timed(180_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'page-n2', functionsDir })
  defer(() => node.close())
  const mine = await connect({ url: cp.url, token: await cp.createToken('t1', [...ALL_SCOPES]) })
  defer(() => mine.close())
  const theirs = await connect({ url: cp.url, token: await cp.createToken('t2', [...ALL_SCOPES]) })
  defer(() => theirs.close())
  const other = await theirs.create({ backend: 'function' })

  const browser = await launch(defer)
  const problems: string[] = []
  const page = await openPage(browser, `${cp.url.replace(/^ws/, 'http')}/ui/`, problems)
  await logIn(page, await cp.createToken('t1', ['sandbox:read']))
  await page.waitForSelector('#cluster-forbidden')
  assert.is(await page.locator('#nodes').count(), 0)
  const sb = await mine.create({ backend: 'function' })
  await page.waitForSelector(`tr[data-sandbox-id="${sb.id}"]`)
  assert.is(await page.locator(`tr[data-sandbox-id="${other.id}"]`).count(), 0)
  assert.is(await page.locator('#sandboxes tbody tr').count(), 1)
  assert.equal(problems.filter((p) => !/status of 40[14]/.test(p)), [])
}))

test('the page says when the control plane is gone and logs in again by itself once it is back', timed(180_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-page-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  let cp = await startTestControlPlane({ dataDir })
  defer(() => cp.close())
  const port = Number(new URL(cp.url).port)
  const key = await cp.createToken('admin', ['admin'])
  const browser = await launch(defer)
  const problems: string[] = []
  const page = await openPage(browser, `${cp.url.replace(/^ws/, 'http')}/ui/`, problems)
  await logIn(page, key)
  await page.waitForSelector('#live.on')
  await cp.close()
  await page.waitForSelector('#live.off')
  // The same port and data dir: the key is in its durable state.
  cp = await startTestControlPlane({ dataDir, port })
  await page.waitForSelector('#live.on')
  await page.waitForSelector('#nodes, .card p.muted')
  assert.is(await page.evaluate("sessionStorage.getItem('warren.key')"), key)
}))

test.run()
