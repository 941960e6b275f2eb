/**
 * `npm run bench -- snapshot`: the reproducibility half through the SDK, end to end (control
 * plane and a container node in this process, over a real WebSocket), each figure beside a
 * baseline measured in the same run:
 *   snapshot of a sandbox that wrote 100 MiB: p50 ms and the new layer's bytes, beside a raw
 *            `mkfs.erofs` of the same 100 MiB written to a host directory;
 *   fork(100): until all 100 are ready, beside createMany(100) from the base layer;
 *   pause and resume: p50 ms each, beside an exec of `true` (one round trip to the sandbox);
 *   replay of a 50-step trajectory: wall time beside the original run's.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startControlPlane, startNode } from '../src/cluster/index.js'
import { connect } from '../src/sdk/index.js'
import { p50, round } from './figures.js'
import { progress, progressDone } from './progress.js'

const RUNS = 5
const FORK = Number(process.argv[2] ?? 100)
const STEPS = 50
const SPEC = { backend: 'container' as const, limits: { cpus: 0.05, memoryMiB: 256, diskMiB: 1024 } }


/** Raw baseline: mkfs.erofs of a host directory holding 100 MiB of random bytes. */
function rawMkfs (dir: string): number[] {
  const src = join(dir, 'raw-src')
  mkdirSync(src, { recursive: true })
  writeFileSync(join(src, 'data'), randomBytes(100 * 1024 * 1024))
  const times: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const out = join(dir, `raw-${i}.erofs`)
    const t = performance.now()
    execFileSync('mkfs.erofs', ['--quiet', '-U00000000-0000-0000-0000-000000000000', out, src])
    times.push(performance.now() - t)
    rmSync(out, { force: true })
  }
  return times
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-snap-'))
const cp = await startControlPlane({ port: 0, dataDir: join(dir, 'cp') })
const closers: Array<() => Promise<void>> = [() => cp.close()]
try {
  const token = await cp.createToken('bench', ['admin'])
  progress('starting a node')
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'bench-snap', dataDir: join(dir, 'node'), containerPool: { min: 0, max: 0 } })
  closers.unshift(() => node.close())
  const client = await connect({ url: cp.url, token })
  closers.unshift(() => client.close())

  // Snapshots of a sandbox that wrote 100 MiB.
  const snapMs: number[] = []
  let layerBytes = 0
  for (let i = 0; i < RUNS; i++) {
    progress(`snapshot of 100 MiB: ${i + 1}/${RUNS}`)
    const sb = await client.create(SPEC)
    await sb.exec(['sh', '-c', 'head -c 104857600 /dev/urandom > /data'])
    const t = performance.now()
    const snap = await sb.snapshot()
    snapMs.push(performance.now() - t)
    layerBytes = snap.bytes
    await sb.kill()
    await client.deleteSnapshot(snap.id)
  }
  progress('raw mkfs.erofs baseline')
  const raw = rawMkfs(dir)

  // fork(100) beside createMany(100).
  progress(`createMany(${FORK}) from the base`)
  let t = performance.now()
  const many = await client.createMany(FORK, SPEC)
  const createManyMs = performance.now() - t
  await client.kill(many.map((s) => s.id))
  progress(`fork(${FORK})`)
  const parent = await client.create(SPEC)
  await parent.exec(['sh', '-c', 'echo forked > /state'])
  t = performance.now()
  const forked = await parent.fork(FORK)
  const forkMs = performance.now() - t
  const forkOk = forked.sandboxes.length
  await client.kill(forked.sandboxes.map((s) => s.id))

  // Pause and resume beside an exec round trip.
  progress('pause and resume')
  const pauseMs: number[] = []
  const resumeMs: number[] = []
  const execMs: number[] = []
  for (let i = 0; i < 20; i++) {
    let s = performance.now()
    await parent.pause()
    pauseMs.push(performance.now() - s)
    s = performance.now()
    await parent.resume()
    resumeMs.push(performance.now() - s)
    s = performance.now()
    await parent.exec(['true'])
    execMs.push(performance.now() - s)
  }

  // A 50-step trajectory, run and then replayed.
  progress(`a ${STEPS}-step trajectory`)
  const original = await client.create({ ...SPEC, deterministic: true })
  t = performance.now()
  for (let i = 0; i < STEPS; i++) {
    if (i % 5 === 0) await original.files.write(`/work/f${i}.txt`, `step ${i}\n`)
    else await original.exec(['sh', '-c', `echo ${i} $SOURCE_DATE_EPOCH >> /work/log; wc -l /work/log`])
  }
  const originalMs = performance.now() - t
  await original.kill()
  progress('replay')
  t = performance.now()
  const replay = await client.replay(original.id)
  const replayMs = performance.now() - t
  await replay.sandbox.kill()
  await parent.kill()
  progressDone()

  console.log(JSON.stringify({
    bench: 'snapshot',
    backend: 'container',
    snapshot_100mib_p50_ms: round(p50(snapMs)),
    snapshot_layer_bytes: layerBytes,
    raw_mkfs_100mib_p50_ms: round(p50(raw)),
    snapshot_ratio_to_raw_mkfs: round(p50(snapMs) / p50(raw), 2),
    fork_n: FORK,
    fork_ready_ms: round(forkMs),
    fork_ok: forkOk,
    create_many_ms: round(createManyMs),
    fork_ratio_to_create_many: round(forkMs / createManyMs, 2),
    pause_p50_ms: round(p50(pauseMs), 2),
    resume_p50_ms: round(p50(resumeMs), 2),
    exec_true_p50_ms: round(p50(execMs), 2),
    replay_steps: replay.steps,
    replay_diverged_at: replay.divergedAt,
    replay_ms: round(replayMs),
    original_run_ms: round(originalMs),
    replay_ratio_to_original: round(replayMs / originalMs, 2)
  }))
} finally {
  for (const close of closers) await close().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
}
