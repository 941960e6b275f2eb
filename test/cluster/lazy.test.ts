import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { pushLayer } from '../../src/images/blob/index.js'
import { buildLayerFromDir } from '../../src/images/index.js'
import { connect } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { busyboxTree, debianPythonLayer, spawnNode, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`lazy layer tests skipped: ${why}`)
const ltest = why === undefined ? test : test.skip

/**
 * The layer built from `tree` pushed to a control plane's blob store, a node in this process
 * loading layers on demand, and a client: all ended with the test.
 */
async function lazyCluster (defer: (fn: () => unknown) => void, dir: string, tree: string, nodeId: string) {
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const layer = await buildLayerFromDir(tree, join(dir, 'build'))
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), layer.path)
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId, dataDir: join(dir, 'node'), lazyLayers: true, containerPool: { max: 0 } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', ['admin']) })
  defer(() => client.close())
  const spec = { backend: 'container' as const, image: { base: pushed.digest }, limits: { cpus: 0.1, memoryMiB: 64 } }
  return { node, client, pushed, spec }
}

ltest('a layer loaded on demand: every file read inside the sandbox is byte-identical; two sandboxes share it', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  busyboxTree(tree, ['sh', 'find', 'md5sum', 'sort', 'cat', 'xargs'])
  const expected: string[] = []
  mkdirSync(join(tree, 'data', 'sub'), { recursive: true })
  for (const [i, size] of [0, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 17, 12_345].entries()) {
    const bytes = randomBytes(size)
    const rel = `./${i % 2 === 0 ? 'sub/' : ''}f${i}`
    writeFileSync(join(tree, 'data', rel), bytes)
    expected.push(`${createHash('md5').update(bytes).digest('hex')}  ${rel}`)
  }
  const { node, client, pushed, spec } = await lazyCluster(defer, dir, tree, 'lazy1')
  const a = await client.create(spec)
  const r = await a.exec(['sh', '-c', 'cd /data && find . -type f | sort | xargs md5sum'])
  assert.is(r.exitCode, 0, r.stderr)
  assert.equal(r.stdout.trim().split('\n').sort(), expected.sort())
  const b = await client.create(spec)
  assert.is((await b.exec(['cat', '/data/f1'])).exitCode, 0)
  const m = (await node.layerMetrics())!
  assert.ok(m.bytesFetched <= pushed.size + pushed.manifest.chunkBytes, `fetched ${m.bytesFetched} of ${pushed.size}`)
  await a.kill()
  await b.kill()
}))

ltest('a cold start fetches what it reads, not the whole image (Debian with python3)', timed(600_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const local = (await debianPythonLayer()).path
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
  const m = (await node.layerMetrics())!
  assert.ok(m.bytesFetched < pushed.size * 0.5, `fetched ${m.bytesFetched} of ${pushed.size}`)
  console.log(`  python3 cold start fetched ${(m.bytesFetched / 1048576).toFixed(1)} MiB of ${(pushed.size / 1048576).toFixed(1)} MiB`)
  await sb.kill()
}))

ltest('kill -9 the node agent: the layer server outlives it, the re-adopted sandbox still reads its lazily loaded layer; a graceful stop ends the server', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = join(dir, 'tree')
  busyboxTree(tree, ['sh', 'md5sum', 'cat', 'sleep'])
  // Never read before the crash: after it, these bytes must come through the surviving server.
  const late = randomBytes(3 << 20)
  writeFileSync(join(tree, 'late.bin'), late)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const layer = await buildLayerFromDir(tree, join(dir, 'build'))
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), layer.path)
  const nodeDir = join(dir, 'node')
  let node = await spawnNode(cp, 'lazy-crash', nodeDir, ['--lazy-layers'])
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', ['admin']) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', image: { base: pushed.digest }, limits: { cpus: 0.1, memoryMiB: 64 } })
  defer(() => sb.kill())
  assert.is((await sb.exec(['sh', '-c', 'echo up'])).stdout, 'up\n')
  const serverPid = Number(readFileSync(join(nodeDir, 'container', 'layer-server', 'pid'), 'utf8'))
  assert.ok(serverPid > 0)

  await node.kill('SIGKILL')
  assert.not.throws(() => process.kill(serverPid, 0), 'the layer server outlives the agent')
  node = await spawnNode(cp, 'lazy-crash', nodeDir, ['--lazy-layers'])
  await waitFor(async () => (await sb.info()).state === 'ready', 20_000, 'sandbox re-adopted')
  const r = await sb.exec(['md5sum', '/late.bin'])
  assert.is(r.exitCode, 0, r.stderr)
  assert.is(r.stdout.split(' ')[0], createHash('md5').update(late).digest('hex'))
  assert.is(Number(readFileSync(join(nodeDir, 'container', 'layer-server', 'pid'), 'utf8')), serverPid, 'the same server, found again')

  // A graceful stop reclaims the sandboxes and ends the server, leaving no mount behind.
  await node.kill('SIGTERM')
  await waitFor(() => { try { process.kill(serverPid, 0); return false } catch { return true } }, 20_000, 'layer server gone')
  assert.not.match(readFileSync('/proc/self/mountinfo', 'utf8'), /\/run\/warren\/layers\/lazy-crash/)
}))

ltest('the layer server dies: a new one serves new sandboxes, and those on the lost layers end as failed, saying why', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-lazy-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const tree = busyboxTree(join(dir, 'tree'), ['sh', 'cat'])
  writeFileSync(join(tree, 'hello'), 'hello\n')
  const { node, client, spec } = await lazyCluster(defer, dir, tree, 'lazy-lost')
  const before = await client.create(spec)
  defer(() => before.kill())
  assert.is((await before.exec(['cat', '/hello'])).stdout, 'hello\n')

  const first = node.layers!.pid
  process.kill(first, 'SIGKILL')
  await waitFor(async () => (await before.info()).state === 'gone', 20_000, 'the sandbox on the lost layers ended')
  const info = await before.info()
  assert.is(info.reason, 'failed')
  assert.match(info.message ?? '', /layer server died/)
  assert.is.not(node.layers!.pid, first, 'a new server was started')
  const after = await client.create(spec)
  defer(() => after.kill())
  assert.is((await after.exec(['cat', '/hello'])).stdout, 'hello\n', 'new sandboxes read through the new server')
}))

test.run()
