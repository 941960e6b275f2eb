/**
 * `npm run bench -- density [N]`: N idle container sandboxes alive at once (default 1,000), and
 * what each costs the host: the RSS of its processes (the agent, PID 1 inside) plus the node
 * process's growth per sandbox (its actor, socket and journal entry). Page cache is excluded;
 * the layers are shared, read-only EROFS images.
 */
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startControlPlane, startNode } from '../src/cluster/index.js'
import { connect, type Sandbox } from '../src/sdk/index.js'
import { progress, progressDone } from './progress.js'

const N = Number(process.argv[2] ?? 1000)
const BATCH = 50

function rssKiB (pid: number | string): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

function sandboxPids (): string[] {
  return readdirSync('/proc').filter((p) => {
    if (!/^\d+$/.test(p)) return false
    try { return readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'warren-init' } catch { return false }
  })
}

const dir = mkdtempSync(join(tmpdir(), 'warren-density-'))
const cp = await startControlPlane({ port: 0 })
const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'density', dataDir: join(dir, 'node'), containerPool: { min: 0, max: 0 } })
try {
  const client = await connect({ url: cp.url, token: await cp.createToken('bench', ['admin']) })
  const spec = { backend: 'container' as const, limits: { cpus: 0.01, memoryMiB: 16, diskMiB: 16 } }
  await (await client.create(spec)).kill() // the default layer, built once
  global.gc?.()
  const nodeBefore = rssKiB(process.pid)
  const pidsBefore = new Set(sandboxPids())
  const all: Sandbox[] = []
  const t = performance.now()
  while (all.length < N) {
    all.push(...await client.createMany(Math.min(BATCH, N - all.length), spec))
    progress(`density: ${all.length}/${N} sandboxes`)
  }
  const createS = (performance.now() - t) / 1000
  const probe = await all[all.length - 1]!.exec(['sh', '-c', 'echo alive'])
  if (probe.stdout !== 'alive\n') throw new Error('the last sandbox does not answer')
  global.gc?.()
  const pids = sandboxPids().filter((p) => !pidsBefore.has(p))
  const sandboxKiB = pids.reduce((sum, p) => sum + rssKiB(p), 0)
  // Control plane, node and client share this process: its growth is an upper bound of the node's share.
  const nodeKiB = Math.max(0, rssKiB(process.pid) - nodeBefore)
  progress('reclaiming')
  for (let i = 0; i < all.length; i += BATCH) await Promise.all(all.slice(i, i + BATCH).map((s) => s.kill()))
  await client.close()
  progressDone()
  console.log(JSON.stringify({
    bench: 'density',
    sandboxes: pids.length,
    host_mib_per_sandbox: Number(((sandboxKiB + nodeKiB) / 1024 / pids.length).toFixed(3)),
    sandbox_process_kib_each: Math.round(sandboxKiB / pids.length),
    node_process_kib_each: Math.round(nodeKiB / pids.length),
    create_s: Number(createS.toFixed(2))
  }))
} finally {
  await node.close()
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
}
