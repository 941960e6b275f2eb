/**
 * `npm run bench -- container`: container sandboxes through the SDK, end to end (control plane
 * and node in this process, over a real WebSocket), against raw baselines measured in the same run:
 *   raw create: a shell loop that mounts the same EROFS layer and an overlay, runs
 *               `bwrap --unshare-all … /bin/true` in it and unmounts;
 *   raw exec:   `nsenter -t PID -a true` into a running sandbox.
 * Figures: fresh creates/s sustained and p50 (pool off), pool claim p50 (pool warm), exec p50.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startControlPlane, startNode } from '../src/cluster/index.js'
import { connect, type Sandbox } from '../src/sdk/index.js'
import { p50 } from './figures.js'
import { progress, progressDone } from './progress.js'

const FRESH = 200
const CLAIMS = 100
const EXECS = 300
const RAW = 100
/** Small reservations, so placement (CPU overcommit) is not what limits the run. */
const SPEC = { backend: 'container' as const, limits: { cpus: 0.1, memoryMiB: 64 } }

const round = (x: number, d = 2): number => Number(x.toFixed(d))

function rawCreate (layer: string, dir: string): number[] {
  const d = (n: string): string => join(dir, n)
  for (const n of ['lower', 'upper', 'work', 'merged']) mkdirSync(d(n), { recursive: true })
  const script = `
    set -e
    mount -t erofs -o ro "${layer}" "${d('lower')}"
    mount -t overlay overlay -o lowerdir="${d('lower')}",upperdir="${d('upper')}",workdir="${d('work')}" "${d('merged')}"
    bwrap --unshare-all --bind "${d('merged')}" / --proc /proc --dev /dev /bin/true
    umount "${d('merged')}"
    umount "${d('lower')}"`
  const times: number[] = []
  for (let i = 0; i < RAW; i++) {
    const t = performance.now()
    const r = spawnSync('sh', ['-c', script], { stdio: ['ignore', 'ignore', 'pipe'] })
    if (r.status !== 0) throw new Error(`raw baseline failed: ${r.stderr.toString()}`)
    times.push(performance.now() - t)
  }
  return times
}

function rawExec (pid: number): number[] {
  const times: number[] = []
  for (let i = 0; i < RAW; i++) {
    const t = performance.now()
    execFileSync('nsenter', ['-t', String(pid), '-a', 'true'])
    times.push(performance.now() - t)
  }
  return times
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-ct-'))
const cp = await startControlPlane({ port: 0 })
const closers: Array<() => Promise<void>> = [() => cp.close()]
try {
  const token = await cp.createToken('bench', ['admin'])

  // Fresh creates: a node with no warm pool.
  progress('fresh creates (pool off)')
  const cold = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'bench-cold', dataDir: join(dir, 'cold'), containerPool: { min: 0, max: 0 } })
  closers.unshift(() => cold.close())
  let client = await connect({ url: cp.url, token })
  await (await client.create(SPEC)).kill() // builds the default layer once
  const fresh: number[] = []
  const made: Sandbox[] = []
  const freshStart = performance.now()
  for (let i = 0; i < FRESH; i++) {
    const t = performance.now()
    made.push(await client.create(SPEC))
    fresh.push(performance.now() - t)
    if (i % 50 === 49) progress(`fresh creates: ${i + 1}/${FRESH}`)
  }
  const freshPerS = FRESH / ((performance.now() - freshStart) / 1000)

  progress('exec round trips')
  const target = made[0]!
  await target.exec(['true'])
  const execs: number[] = []
  for (let i = 0; i < EXECS; i++) {
    const t = performance.now()
    await target.exec(['true'])
    execs.push(performance.now() - t)
  }
  const pid = Number(readdirSync('/proc').find((p) => {
    try { return /^\d+$/.test(p) && execFileSync('cat', [`/proc/${p}/comm`]).toString().trim() === 'warren-init' } catch { return false }
  }))
  progress('raw exec baseline (nsenter)')
  const rawEx = Number.isFinite(pid) ? rawExec(pid) : []
  await Promise.all(made.map((s) => s.kill()))
  await client.close()
  await cold.close()
  closers.shift()

  progress('pool claims')
  const warm = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'bench-warm', dataDir: join(dir, 'warm'), containerPool: { min: 0, max: 16 } })
  closers.unshift(() => warm.close())
  client = await connect({ url: cp.url, token })
  const claims: number[] = []
  const claimed: Sandbox[] = []
  for (let i = 0; i < CLAIMS; i++) {
    // Wait for the pool to refill so every measured create is a claim, not a launch.
    await new Promise((resolve) => setTimeout(resolve, 20))
    const t = performance.now()
    claimed.push(await client.create(SPEC))
    claims.push(performance.now() - t)
  }
  await Promise.all(claimed.map((s) => s.kill()))
  await client.close()

  progress('raw baselines')
  const layer = join(dir, 'cold', 'container', 'layers', 'busybox.erofs')
  const raw = rawCreate(layer, join(dir, 'raw'))
  progressDone()

  console.log(JSON.stringify({
    bench: 'container',
    fresh_creates_per_s: round(freshPerS, 1),
    fresh_p50_ms: round(p50(fresh)),
    raw_p50_ms: round(p50(raw)),
    ratio_to_raw: round(p50(fresh) / p50(raw)),
    pool_claim_p50_ms: round(p50(claims.slice(10))),
    exec_p50_ms: round(p50(execs)),
    raw_exec_p50_ms: round(p50(rawEx)),
    exec_ratio_to_raw: round(p50(execs) / p50(rawEx))
  }))
} finally {
  for (const close of closers) await close().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
}
