/**
 * `npm run bench -- microvm-memory [FORKS]`: memory snapshots of a microVM and the forks started
 * from one, the current design beside the previous one, measured in the same run on the same
 * snapshot:
 *
 *   save                 the source's vCPUs stopped, its whole machine (RAM in the stream) saved
 *   fork create p50      FORKS VMs (default 8) from the snapshot, one after another, alive at
 *                        once. Shared (now): the stream loaded once per node into sealed RAM
 *                        the node holds, each fork mapping it private. Whole stream (the
 *                        previous design, `templates: false`): every fork loads the whole stream
 *                        into its own RAM.
 *   memory per fork      PSS and RSS of each fork's QEMU (PSS counts a page k VMs share as 1/k),
 *                        and the host's MemAvailable drop per fork, the shared RAM included
 *
 * The source writes 64 MiB of random bytes into its writable layer (guest memory) before the snapshot,
 * so the forks have that much to share. Under TCG where KVM cannot run a stock guest (the JSON says which).
 * Its last line is one JSON object.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createCgroupProvider } from '../src/backends/container/index.js'
import { createMicrovmBackend, type MicrovmBackend } from '../src/backends/microvm/index.js'
import type { SandboxHandle } from '../src/backends/types.js'
import { memAvailableKiB, p50, processMemoryKiB as memKiB, round, sleep } from './figures.js'
import { progress, progressDone } from './progress.js'

const FORKS = Number(process.argv[2] ?? 8)
const LIMITS = { cpus: 1, memoryMiB: 256, diskMiB: 96, pids: 64 }
const GUEST_DIR = process.env.WARREN_GUEST_DIR ?? '/var/tmp/warren-test-guest'
/** 64 MiB of random bytes in the writable layer (a tmpfs in guest memory): pages no zero-page flag can stand for. */
const TOUCH = 'head -c 67108864 /dev/urandom > /root/hold'



/** FORKS VMs from `state` on `b`, alive at once: create times and memory, then all killed. */
async function forks (b: MicrovmBackend, state: string, what: string): Promise<{ createMs: number[], pssMiB: number, rssMiB: number, hostMiB: number }> {
  const handles: SandboxHandle[] = []
  const createMs: number[] = []
  const before = memAvailableKiB()
  try {
    for (let i = 0; i < FORKS; i++) {
      progress(`${what}: fork ${i + 1}/${FORKS}`)
      const t = performance.now()
      handles.push(await b.create({ limits: LIMITS, memory: { state, vcpus: 1, memoryMiB: LIMITS.memoryMiB } }))
      createMs.push(performance.now() - t)
    }
    await sleep(3000)
    for (const h of handles) {
      const r = await b.exec(h, ['sh', '-c', 'test -s /root/hold && echo ok'])
      if (r.exitCode !== 0) throw new Error(`a fork lost the source's memory (exit ${r.exitCode})`)
    }
    const mems = handles.map((h) => memKiB(b.vm(h)!.pid))
    return {
      createMs,
      pssMiB: mems.reduce((s, m) => s + m.pss, 0) / FORKS / 1024,
      rssMiB: mems.reduce((s, m) => s + m.rss, 0) / FORKS / 1024,
      hostMiB: (before - memAvailableKiB()) / FORKS / 1024
    }
  } finally {
    for (const h of handles) await b.kill(h)
  }
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-vmm-'))
const runDir = mkdtempSync(join(tmpdir(), 'wbm-'))
const common = { guestDir: GUEST_DIR, runDir, layersDir: join(dir, 'layers'), pool: { max: 0 } }
const closers: Array<() => Promise<void>> = []
try {
  const shared: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'shared'), ...common, cgroups: createCgroupProvider(`warren-bench-vmm-${process.pid}`) })
  closers.push(() => shared.close())
  progress('microvm-memory: the source')
  await shared.guest()
  const src = await shared.create({ limits: LIMITS })
  const touched = await shared.exec(src, ['sh', '-c', TOUCH])
  if (touched.exitCode !== 0) throw new Error(`the source could not fill its memory (exit ${touched.exitCode})`)
  progress('microvm-memory: the snapshot')
  const t0 = performance.now()
  const snap = await shared.snapshot!(src, { memory: true })
  const saveMs = performance.now() - t0
  await shared.kill(src)

  const now = await forks(shared, snap.digest, 'shared')
  // The previous design: no templates, so each fork loads the whole stream. Same store, same state file.
  const whole: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'whole'), ...common, runDir: `${runDir}-w`, templates: false, cgroups: createCgroupProvider(`warren-bench-vmw-${process.pid}`) })
  closers.push(() => whole.close())
  const before = await forks(whole, snap.digest, 'whole stream')
  progressDone()

  console.log(JSON.stringify({
    bench: 'microvm-memory',
    accel: shared.status().accel,
    guest_memory_mib: LIMITS.memoryMiB,
    touched_mib: 64,
    forks: FORKS,
    save_ms: Math.round(saveMs),
    state_mib: round(snap.bytes / 1024 / 1024),
    fork_first_ms: Math.round(now.createMs[0]!),
    fork_create_p50_ms: Math.round(p50(now.createMs)),
    whole_stream_fork_create_p50_ms: Math.round(p50(before.createMs)),
    fork_create_ratio: round(p50(before.createMs) / p50(now.createMs), 2),
    fork_pss_mib: round(now.pssMiB),
    fork_rss_mib: round(now.rssMiB),
    fork_host_mib: round(now.hostMiB),
    whole_stream_fork_pss_mib: round(before.pssMiB),
    whole_stream_fork_rss_mib: round(before.rssMiB),
    whole_stream_fork_host_mib: round(before.hostMiB),
    fork_host_memory_ratio: round(before.hostMiB / now.hostMiB, 2)
  }))
} finally {
  for (const close of closers.reverse()) await close().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
  rmSync(runDir, { recursive: true, force: true })
  rmSync(`${runDir}-w`, { recursive: true, force: true })
}
