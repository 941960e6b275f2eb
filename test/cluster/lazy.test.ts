import { createHash, randomBytes } from 'node:crypto'
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { pushLayer } from '../../src/images/blob/index.js'
import { buildLayerFromDir, LayerStore } from '../../src/images/index.js'
import { connect } from '../../src/sdk/index.js'
import { timed } from '../support/index.js'
import { startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`lazy layer tests skipped: ${why}`)
const ltest = why === undefined ? test : test.skip

ltest('a layer loaded on demand: every file read inside the sandbox is byte-identical; two sandboxes share it', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'bin'), { recursive: true })
  copyFileSync('/bin/busybox', join(tree, 'bin', 'busybox'))
  chmodSync(join(tree, 'bin', 'busybox'), 0o755)
  for (const a of ['sh', 'find', 'md5sum', 'sort', 'cat', 'xargs']) symlinkSync('busybox', join(tree, 'bin', a))
  const expected: string[] = []
  mkdirSync(join(tree, 'data', 'sub'), { recursive: true })
  for (const [i, size] of [0, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 17, 12_345].entries()) {
    const bytes = randomBytes(size)
    const rel = `./${i % 2 === 0 ? 'sub/' : ''}f${i}`
    writeFileSync(join(tree, 'data', rel), bytes)
    expected.push(`${createHash('md5').update(bytes).digest('hex')}  ${rel}`)
  }
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const layer = await buildLayerFromDir(tree, join(dir, 'build'))
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), layer.path)
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'lazy1', dataDir: join(dir, 'node'), lazyLayers: true, containerPool: { max: 0 } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', ['admin']) })
  defer(() => client.close())
  const spec = { backend: 'container' as const, image: { base: pushed.digest }, limits: { cpus: 0.1, memoryMiB: 64 } }
  const a = await client.create(spec)
  const r = await a.exec(['sh', '-c', 'cd /data && find . -type f | sort | xargs md5sum'])
  assert.is(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout.trim().split('\n').sort(), expected.sort())
  const b = await client.create(spec)
  assert.is((await b.exec(['cat', '/data/f1'])).exitCode, 0)
  const m = node.layerMetrics()!
  assert.ok(m.bytesFetched <= pushed.size + pushed.manifest.chunkBytes, `fetched ${m.bytesFetched} of ${pushed.size}`)
  await a.kill()
  await b.kill()
}))

ltest('a cold start fetches what it reads, not the whole image (Debian with python3)', timed(600_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const local = await new LayerStore('/var/tmp/warren-test-layers').resolve('debian:bookworm:python3')
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), local)
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'lazy2', dataDir: join(dir, 'node'), lazyLayers: true, containerPool: { max: 0 } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', ['admin']) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', image: { base: pushed.digest }, limits: { cpus: 0.5, memoryMiB: 256 } })
  const r = await sb.exec(['python3', '-c', 'import json; print(json.dumps({"ok": 1}))'])
  assert.is(r.stdout, '{"ok": 1}\n', r.stderr)
  const m = node.layerMetrics()!
  assert.ok(m.bytesFetched < pushed.size * 0.5, `fetched ${m.bytesFetched} of ${pushed.size}`)
  console.log(`  python3 cold start fetched ${(m.bytesFetched / 1048576).toFixed(1)} MiB of ${(pushed.size / 1048576).toFixed(1)} MiB`)
  await sb.kill()
}))

test.run()
