/**
 * `npm run bench -- files [MiB]`: a file of 1 GiB (or MiB given) up into a container sandbox and
 * back down through the SDK, then a tree of the same bytes in 1,000 files (`files.upload` and
 * `files.download`, a tar each way) (control plane in this process, the node a `warren node` child, so
 * its memory is its own), against a raw WebSocket bulk transfer of the same bytes over loopback
 * in the same run (one `ws` server and client, messages of the SDK's chunk size, the sender
 * waiting on the socket's buffer), so a noisy machine lowers both and the ratio stays meaningful.
 * Figures: upload and download MB/s and their ratio to raw (the tree's also to the single file's);
 * the node's peak resident memory (VmHWM) above what it held before the transfers, which bounds
 * what it buffered.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { WebSocket, WebSocketServer } from 'ws'
import { startControlPlane } from '../src/cluster/index.js'
import { connect, FilesClientDefaults } from '../src/sdk/index.js'
import { round } from './figures.js'
import { progress, progressDone } from './progress.js'

const MiB = 1024 * 1024
const SIZE = Number(process.argv[2] ?? 1024) * MiB
const BLOCK = 8 * MiB

/** A random 8 MiB block, each copy stamped with its index: the bench holds 8 MiB, not the file. */
const block = randomBytes(BLOCK)
async function * source (): AsyncGenerator<Uint8Array> {
  for (let at = 0, n = 0; at < SIZE; at += BLOCK, n++) {
    const b = block.slice(0, Math.min(BLOCK, SIZE - at))
    new DataView(b.buffer).setUint32(0, n)
    yield b
  }
}

function status (pid: number, key: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? NaN : Number(m[1]) * 1024
}

/** Bytes per second of SIZE bytes sent from a ws client to a ws server on loopback. */
async function rawWebSocket (): Promise<number> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 2 * MiB })
  await new Promise((resolve) => server.once('listening', resolve))
  const port = (server.address() as { port: number }).port
  let received = 0
  const done = new Promise<void>((resolve) => {
    server.on('connection', (s) => s.on('message', (m: Buffer) => { received += m.length; if (received >= SIZE) { s.send('done'); resolve() } }))
  })
  const ws = new WebSocket(`ws://127.0.0.1:${port}`, { maxPayload: 2 * MiB })
  await new Promise((resolve) => ws.once('open', resolve))
  const acked = new Promise((resolve) => ws.once('message', resolve))
  const start = performance.now()
  for await (const b of source()) {
    for (let at = 0; at < b.length; at += FilesClientDefaults.chunkBytes) {
      ws.send(b.subarray(at, at + FilesClientDefaults.chunkBytes))
      while (ws.bufferedAmount > 8 * MiB) await new Promise((resolve) => setTimeout(resolve, 1))
    }
  }
  await done
  await acked
  const s = (performance.now() - start) / 1000
  ws.close()
  server.close()
  return SIZE / s
}

/** Members of the tree, in directories of 100. */
const TREE_FILES = 1000

/** A local tree of SIZE bytes in TREE_FILES files; the sha256 of their bytes in order. */
function makeTree (root: string): string {
  const hash = createHash('sha256')
  const each = Math.floor(SIZE / TREE_FILES)
  for (let i = 0; i < TREE_FILES; i++) {
    const d = join(root, `d${Math.floor(i / 100)}`)
    if (i % 100 === 0) mkdirSync(d, { recursive: true })
    const b = block.subarray(0, each)
    new DataView(b.buffer, b.byteOffset).setUint32(0, i)
    writeFileSync(join(d, `f${String(i).padStart(4, '0')}`), b)
    hash.update(b)
  }
  return hash.digest('hex')
}

/** The sha256 of a tree's files, in the order makeTree wrote them. */
function treeHash (root: string): string {
  const hash = createHash('sha256')
  for (const d of readdirSync(root).sort()) for (const f of readdirSync(join(root, d)).sort()) hash.update(readFileSync(join(root, d, f)))
  return hash.digest('hex')
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-files-'))
const cp = await startControlPlane({ port: 0 })
let node: ChildProcess | undefined
try {
  progress('starting a node')
  node = spawn(process.execPath, [join('bin', 'warren.js'), 'node', '--join', cp.url, '--token', cp.joinToken, '--node-id', 'bench-files', '--data-dir', join(dir, 'node')], { stdio: ['ignore', 'pipe', 'pipe'] })
  await new Promise<void>((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`node did not join: ${out}`)), 30_000)
    node!.stdout!.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('joined')) { clearTimeout(timer); resolve() } })
    node!.stderr!.on('data', (b: Buffer) => { out += b.toString() })
  })
  const pid = node.pid!
  const client = await connect({ url: cp.url, token: await cp.createToken('bench', ['admin']) })
  // The writable layer is a tmpfs charged to the sandbox's memory: the file needs room in both.
  const sb = await client.create({ backend: 'container', limits: { cpus: 1, memoryMiB: 2 * Math.ceil(SIZE / MiB) + 512, diskMiB: 2 * Math.ceil(SIZE / MiB) + 512 } })
  await sb.files.write('/warm', 'x') // first use out of the way
  const rssBefore = status(pid, 'VmRSS')
  const hwmBefore = status(pid, 'VmHWM')

  progress(`upload of ${SIZE / MiB} MiB`)
  let t = performance.now()
  const up = await sb.files.write('/big.bin', source()).catch(async (err: unknown) => {
    // Say why the sandbox went, when it did.
    throw new Error(`upload failed: ${String(err)}; sandbox: ${JSON.stringify(await sb.info().catch((e: unknown) => String(e)))}`)
  })
  const upS = (performance.now() - t) / 1000
  const hwmUp = status(pid, 'VmHWM')

  progress(`download of ${SIZE / MiB} MiB`)
  const hash = createHash('sha256')
  let got = 0
  t = performance.now()
  for await (const c of sb.files.readStream('/big.bin') as unknown as AsyncIterable<Uint8Array>) { hash.update(c); got += c.byteLength }
  const downS = (performance.now() - t) / 1000
  const hwmDown = status(pid, 'VmHWM')
  if (got !== SIZE || hash.digest('hex') !== up.sha256) throw new Error(`download differs: ${got} bytes`)

  progress(`a tree of ${TREE_FILES} files, ${SIZE / MiB} MiB`)
  const treeSha = makeTree(join(dir, 'tree'))
  t = performance.now()
  await sb.files.upload(join(dir, 'tree'), '/tree')
  const treeUpS = (performance.now() - t) / 1000
  t = performance.now()
  await sb.files.download('/tree', join(dir, 'tree-back'))
  const treeDownS = (performance.now() - t) / 1000
  if (treeHash(join(dir, 'tree-back')) !== treeSha) throw new Error('the tree came back different')

  progress('raw WebSocket baseline')
  const raw = await rawWebSocket()
  progressDone()
  await sb.kill()
  await client.close()

  const mbps = (bytes: number, s: number): number => round(bytes / s / 1e6)
  const figures = {
    bench: 'files',
    bytes: SIZE,
    upload_mb_per_s: mbps(SIZE, upS),
    download_mb_per_s: mbps(SIZE, downS),
    raw_ws_mb_per_s: round(raw / 1e6),
    upload_vs_raw: round(SIZE / upS / raw, 3),
    download_vs_raw: round(SIZE / downS / raw, 3),
    tree_files: TREE_FILES,
    tree_upload_mb_per_s: mbps(SIZE, treeUpS),
    tree_download_mb_per_s: mbps(SIZE, treeDownS),
    tree_upload_vs_file: round(upS / treeUpS, 3),
    tree_download_vs_file: round(downS / treeDownS, 3),
    node_rss_before_mib: round(rssBefore / MiB),
    node_hwm_before_mib: round(hwmBefore / MiB),
    node_peak_rss_mib: round(Math.max(hwmUp, hwmDown) / MiB),
    node_peak_growth_upload_mib: round((hwmUp - Math.max(rssBefore, hwmBefore)) / MiB),
    node_peak_growth_download_mib: round((hwmDown - Math.max(rssBefore, hwmUp)) / MiB),
    sha256_checked: true
  }
  console.log(JSON.stringify(figures))
} finally {
  node?.kill('SIGTERM')
  await new Promise((resolve) => { if (node === undefined || node.exitCode !== null) resolve(undefined); else node.once('exit', resolve) })
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
}
