/**
 * `warren image build` from any machine: against `warren up` with a data dir of its own (not
 * ~/.warren/data), the CLI pushes each layer over HTTP to the URL its config names, and
 * `warren run --image B --workspace W --tools T` stacks them in a container sandbox whose node
 * loads them on demand (its layer cache fetched each layer's chunk manifest from the store).
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { timed } from '../support/index.js'
import { busyboxTree } from '../cluster/harness.js'
import { cli } from '../security/warren-up.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`image push CLI tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('image build pushes over HTTP to warren up --data-dir D; warren run stacks base, workspace and tools from it', timed(240_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-push-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // HOME is a fresh directory too: nothing may land in a default ~/.warren/data.
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: join(dir, 'home'), WARREN_CONFIG: join(dir, 'config.json') }
  delete env.WARREN_URL
  delete env.WARREN_TOKEN
  const data = join(dir, 'elsewhere')
  const up = spawn(process.execPath, [cli, 'up', '--port', '0', '--data-dir', data], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)))
  defer(async () => { if (up.exitCode === null) { up.kill('SIGTERM'); await exited } })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    up.stdout.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('Ctrl-C')) resolve() })
    up.stderr.on('data', (b: Buffer) => { out += b.toString() })
    up.once('exit', (code) => reject(new Error(`warren up exited ${code}: ${out}`)))
  })
  const warren = (args: string[], extra: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [cli, ...args], { env: { ...env, ...extra }, encoding: 'utf8', timeout: 90_000 })

  const base = busyboxTree(join(dir, 'base'), ['sh', 'cat'])
  writeFileSync(join(base, 'from-base'), 'base\n')
  const ws = join(dir, 'ws')
  busyboxTree(ws, [])
  writeFileSync(join(ws, 'task.txt'), 'workspace\n')
  const tools = join(dir, 'tools')
  busyboxTree(tools, [])
  writeFileSync(join(tools, 'tool.txt'), 'tools\n')
  const digests: string[] = []
  for (const [kind, name, tree] of [['base', 'b:1', base], ['workspace', 'w:1', ws], ['tools', 't:1', tools]] as const) {
    const r = warren(['image', 'build', '--kind', kind, '--name', name, '--from-dir', tree])
    assert.is(r.status, 0, r.stderr)
    assert.match(r.stdout, new RegExp(`^sha256:[0-9a-f]{64} .* as ${name}\\n$`))
    assert.match(r.stderr, /pushing to ws:\/\/127\.0\.0\.1:\d+/)
    digests.push(r.stdout.slice(0, 71))
  }
  assert.not.ok(existsSync(join(dir, 'home', '.warren', 'data')), 'nothing was written to the default data dir')
  for (const d of digests) assert.ok(existsSync(join(data, 'blobs', 'blobs', 'sha256', d.slice(7))), `${d} is in the blob store of --data-dir`)
  const again = warren(['image', 'build', '--kind', 'base', '--name', 'b:1', '--from-dir', base])
  assert.is(again.status, 0, again.stderr)
  assert.match(again.stderr, /holds this layer already: nothing sent/)

  const ran = warren(['run', '--image', 'b:1', '--workspace', 'w:1', '--tools', 't:1', '--', 'cat', '/from-base', '/task.txt', '/tool.txt'])
  assert.is(ran.status, 0, ran.stderr)
  assert.is(ran.stdout, 'base\nworkspace\ntools\n')
  // The node loaded the layers lazily: its cache holds each one's manifest, fetched from the store.
  const cached = readdirSync(join(data, 'container', 'cache', 'layers'))
  for (const d of digests) assert.ok(cached.includes(d.slice(7)), `the layer cache fetched ${d}`)
  for (const d of digests) assert.ok(existsSync(join(data, 'container', 'cache', 'layers', d.slice(7), 'manifest.json')))

  const wsAsBase = warren(['run', '--image', 'w:1', '--', 'true'])
  assert.is(wsAsBase.status, 1)
  assert.match(wsAsBase.stderr, /WARREN_ERR_BAD_SPEC: spec\.image\.base: w:1 \(sha256:[0-9a-f]{64}\) is a workspace layer/)

  // A sandbox key may not push.
  const made = warren(['token', 'create', '--tenant', 'plain', '--scopes', 'sandbox:create,sandbox:exec'])
  assert.is(made.status, 0, made.stderr)
  const url = /url:\s+(ws:\/\/\S+)/.exec(out)![1]!
  const refused = warren(['image', 'build', '--kind', 'base', '--no-tag', '--from-dir', tools], { WARREN_URL: url, WARREN_TOKEN: made.stdout.trim() })
  assert.is(refused.status, 1)
  assert.match(refused.stderr, /WARREN_ERR_FORBIDDEN: this key lacks the scope image:push/)
}))

test.run()
