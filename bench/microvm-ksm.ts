/**
 * `npm run bench -- microvm-ksm [N]`: what the kernel's same-page merging (KSM) gives idle microVMs,
 * measured on the same N VMs (default 20, 128 MiB guests restored from one template) with KSM off
 * and then on:
 *
 *   host memory per VM     PSS of each QEMU, and the host's MemAvailable, KSM off | on
 *   pages merged           /sys/kernel/mm/ksm pages_sharing (pages that point at a shared copy)
 *   ksmd's CPU             its CPU time while it merged, as a share of one core
 *
 * QEMU marks every guest's RAM mergeable already (`mem-merge`, on by default; the bench checks the
 * `mg` flag), so KSM is the host's switch alone (`/sys/kernel/mm/ksm/run`). The bench turns it on
 * for its run and puts it back as it found it, unmerging what it merged. The host is shared: turn
 * it on for good only where the CPU can be spared. Its last line is one JSON object.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createCgroupProvider } from '../src/backends/container/index.js'
import { createMicrovmBackend } from '../src/backends/microvm/index.js'
import type { SandboxHandle } from '../src/backends/types.js'
import { memAvailableKiB, processMemoryKiB, round, sleep } from './figures.js'
import { progress, progressDone } from './progress.js'

const N = Number(process.argv[2] ?? 20)
const LIMITS = { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 64 }
const GUEST_DIR = process.env.WARREN_GUEST_DIR ?? '/var/tmp/warren-test-guest'
const KSM = '/sys/kernel/mm/ksm'
/** How long KSM is given to scan everything twice, at most. */
const MERGE_WAIT_MS = 180_000

const ksm = (name: string): number => Number(readFileSync(join(KSM, name), 'utf8').trim())
const setKsm = (name: string, value: number): void => writeFileSync(join(KSM, name), `${value}\n`)
const pssKiB = (pid: number): number => processMemoryKiB(pid).pss
const pageKiB = 4

/** ksmd's CPU time so far, in clock ticks (user + system). */
function ksmdTicks (): number {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (!stat.includes('(ksmd)')) continue
      const f = stat.replace(/^.*\) /, '').split(' ')
      return Number(f[11]) + Number(f[12])
    } catch { /* gone meanwhile */ }
  }
  return 0
}

/** True when the VM's guest RAM mapping (the largest) carries the mergeable flag. */
function ramMergeable (pid: number): boolean {
  let largest = 0
  let flags = ''
  let size = 0
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const s = /^Size:\s+(\d+) kB/.exec(line)
    if (s !== null) size = Number(s[1])
    const v = /^VmFlags: (.*)$/.exec(line)
    if (v !== null && size > largest) { largest = size; flags = v[1]! }
  }
  return flags.split(' ').includes('mg')
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-ksm-'))
const runDir = mkdtempSync(join(tmpdir(), 'wbk-'))
const before = { run: ksm('run'), pagesToScan: ksm('pages_to_scan'), sleepMs: ksm('sleep_millisecs') }
const b = createMicrovmBackend({ dataDir: join(dir, 'vm'), guestDir: GUEST_DIR, runDir, layersDir: join(dir, 'layers'), pool: { max: 0 }, cgroups: createCgroupProvider(`warren-bench-ksm-${process.pid}`) })
const handles: SandboxHandle[] = []
try {
  await b.kill(await b.create({ limits: LIMITS })) // the template
  for (let i = 0; i < N; i++) {
    handles.push(await b.create({ limits: LIMITS }))
    progress(`microvm-ksm: ${i + 1}/${N} VMs`)
  }
  const pids = handles.map((h) => b.vm(h)!.pid)
  await sleep(10_000)
  const off = { pssKiB: pids.reduce((s, p) => s + pssKiB(p), 0) / N, availKiB: memAvailableKiB() }

  progress('microvm-ksm: KSM on')
  const ticks0 = ksmdTicks()
  const scans0 = ksm('full_scans')
  const t0 = performance.now()
  setKsm('pages_to_scan', 2000)
  setKsm('sleep_millisecs', 10)
  setKsm('run', 1)
  while (ksm('full_scans') < scans0 + 2 && performance.now() - t0 < MERGE_WAIT_MS) await sleep(1000)
  const mergeS = (performance.now() - t0) / 1000
  const on = { pssKiB: pids.reduce((s, p) => s + pssKiB(p), 0) / N, availKiB: memAvailableKiB(), sharing: ksm('pages_sharing'), shared: ksm('pages_shared') }
  const ksmdCore = (ksmdTicks() - ticks0) / 100 / mergeS
  progressDone()

  console.log(JSON.stringify({
    bench: 'microvm-ksm',
    accel: b.status().accel,
    vms: N,
    guest_memory_mib: LIMITS.memoryMiB,
    ram_marked_mergeable: ramMergeable(pids[0]!),
    pss_per_vm_ksm_off_mib: round(off.pssKiB / 1024),
    pss_per_vm_ksm_on_mib: round(on.pssKiB / 1024),
    pss_ratio: round(off.pssKiB / on.pssKiB, 2),
    mem_available_gain_per_vm_mib: round((on.availKiB - off.availKiB) / N / 1024),
    pages_sharing: on.sharing,
    pages_shared: on.shared,
    merged_mib: round((on.sharing - on.shared) * pageKiB / 1024),
    full_scans: ksm('full_scans') - scans0,
    merge_s: round(mergeS),
    ksmd_core_share: round(ksmdCore, 3)
  }))
} finally {
  // As it was: what was merged is unmerged (run = 2) before KSM is put back.
  try {
    setKsm('run', 2)
    for (let i = 0; i < 120 && ksm('pages_sharing') > 0; i++) await sleep(500)
    setKsm('run', before.run)
    setKsm('pages_to_scan', before.pagesToScan)
    setKsm('sleep_millisecs', before.sleepMs)
  } catch { /* no KSM here */ }
  for (const h of handles) await b.kill(h).catch(() => {})
  await b.close().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
  rmSync(runDir, { recursive: true, force: true })
}
