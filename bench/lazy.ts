/**
 * `npm run bench -- lazy`: an image of over 1 GiB (a Debian base with python3 plus large data
 * files) in the control plane's blob store on loopback, and a workload that reads about 6 % of
 * it (python3 reading a few of the data files). Measured in the same run:
 *   lazy:  a node loading layers on demand (FUSE + chunk cache): create + first exec, cold;
 *   full:  a node pulling the whole layer first: create + the same exec, cold.
 * read_mib is what the file system asked of the layer (EROFS reads, after readahead);
 * fetched_mib what the cache fetched from the store; fetch_ratio = fetched / read.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startControlPlane, startNode } from '../src/cluster/index.js'
import { pushLayer } from '../src/images/blob/index.js'
import { buildLayerFromDir, debootstrapTree, run } from '../src/images/index.js'
import { connect } from '../src/sdk/index.js'
import { progress, progressDone } from './progress.js'

const DATA_FILES = 96
const FILE_MIB = 10
const READ_FILES = 6 // 60 MiB of ~1.1 GiB: about 6 %

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-lazy-'))
const cp = await startControlPlane({ port: 0, dataDir: join(dir, 'cp') })
try {
  progress('building the image: Debian + python3 (cached) + data files')
  const debian = await debootstrapTree('/var/tmp/warren-test-layers/trees', 'bookworm', ['python3'], (l) => progress(`debootstrap: ${l.slice(0, 60)}`))
  const tree = join(dir, 'tree')
  mkdirSync(tree)
  await run('cp', ['-a', `${debian}/.`, tree]) // device nodes and all: cp -a, not fs.cpSync
  mkdirSync(join(tree, 'data'))
  for (let i = 0; i < DATA_FILES; i++) writeFileSync(join(tree, 'data', `f${i}`), randomBytes(FILE_MIB << 20))
  const layer = await buildLayerFromDir(tree, join(dir, 'build'))
  rmSync(tree, { recursive: true, force: true })
  progress('pushing to the blob store')
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), layer.path)
  rmSync(layer.path, { force: true })
  const token = await cp.createToken('bench', ['admin'])
  const workload = ['python3', '-c', `import sys\nn = 0\nfor i in range(${READ_FILES}):\n  n += len(open('/data/f%d' % (i * 13), 'rb').read())\nprint(n)`]
  const spec = { backend: 'container' as const, image: { base: pushed.digest }, limits: { cpus: 1, memoryMiB: 512 } }

  async function coldRun (nodeId: string, lazy: boolean): Promise<{ ms: number, metrics: Awaited<ReturnType<Awaited<ReturnType<typeof startNode>>['layerMetrics']>> }> {
    const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId, dataDir: join(dir, nodeId), lazyLayers: lazy, containerPool: { max: 0 } })
    const client = await connect({ url: cp.url, token })
    try {
      const t = performance.now()
      const sb = await client.create({ ...spec, deadlineMs: 5000 })
      const r = await sb.exec(workload)
      const ms = performance.now() - t
      if (r.stdout.trim() !== String(READ_FILES * (FILE_MIB << 20))) throw new Error(`workload failed: ${r.stdout} ${r.stderr}`)
      await sb.kill()
      return { ms, metrics: await node.layerMetrics() }
    } finally {
      await client.close()
      await node.close()
    }
  }

  progress('cold start, layers on demand')
  const lazy = await coldRun('bench-lazy', true)
  progress('cold start, whole layer pulled first')
  const full = await coldRun('bench-full', false)
  progressDone()
  const mib = (b: number): number => Number((b / 1048576).toFixed(1))
  const m = lazy.metrics!
  console.log(JSON.stringify({
    bench: 'lazy',
    image_mib: mib(pushed.size),
    read_mib: mib(m.bytesServed),
    fetched_mib: mib(m.bytesFetched),
    fetch_ratio: Number((m.bytesFetched / Math.max(1, m.bytesServed)).toFixed(2)),
    workload_reads_mib: READ_FILES * FILE_MIB,
    cold_first_exec_ms: Math.round(lazy.ms),
    full_pull_ms: Math.round(full.ms),
    cold_vs_full: Number((lazy.ms / full.ms).toFixed(3))
  }))
} finally {
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
}
