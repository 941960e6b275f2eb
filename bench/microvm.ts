/**
 * `npm run bench -- microvm [N]`: microVM sandboxes, each figure beside the container backend's
 * measured in the same run, both backends driven directly (no control plane):
 *
 *   cold boot to ready p50     QEMU started and booted until the agent answers (no pool, no templates)
 *                              | a container launched on the spot (no pool)
 *   warm pool create p50       a ready VM handed out and renamed | a pooled container claimed
 *   saved-snapshot create p50  QEMU started `-incoming` from the shape's template, RAM mapped
 *                              private, given its own name, seed and time | a fresh container
 *   exec `true` p50            through the agent, over virtio-serial | over the container's socket
 *   density                    N idle VMs (default 100, 128 MiB guests) restored from one template and
 *                              alive at once: PSS and RSS per VM (the shared figure: PSS counts a
 *                              page shared by k VMs as 1/k), the template's RAM, and the host's
 *                              MemAvailable drop per VM | N idle containers' RSS each
 *
 * Under TCG on a machine without /dev/kvm (the JSON says which). Its last line is one JSON object.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createCgroupProvider, createContainerBackend, type ContainerBackend } from '../src/backends/container/index.js'
import { createMicrovmBackend, type MicrovmBackend } from '../src/backends/microvm/index.js'
import type { Backend, SandboxHandle } from '../src/backends/types.js'
import { heldGuestRamKiB, memAvailableKiB, p50, processMemoryKiB as memKiB, round, sleep } from './figures.js'
import { progress, progressDone } from './progress.js'

const N = Number(process.argv[2] ?? 100)
const COLD = 5
const POOL = 5
const RESTORE = 10
const EXECS = 50
const VM_LIMITS = { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 64 }
const CT_LIMITS = { cpus: 0.1, memoryMiB: 64, diskMiB: 16, pids: 64 }
const GUEST_DIR = process.env.WARREN_GUEST_DIR ?? '/var/tmp/warren-test-guest'



async function timedCreates (b: Backend, n: number, spec: Parameters<Backend['create']>[0], keep: SandboxHandle[]): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    keep.push(await b.create(spec))
    times.push(performance.now() - t)
  }
  return times
}

async function execTimes (b: Backend, h: SandboxHandle): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < EXECS; i++) {
    const t = performance.now()
    const r = await b.exec(h, ['true'])
    if (r.exitCode !== 0) throw new Error(`exec true exited ${r.exitCode}`)
    times.push(performance.now() - t)
  }
  return times
}

async function killAll (b: Backend, hs: SandboxHandle[]): Promise<void> {
  for (let i = 0; i < hs.length; i += 10) await Promise.all(hs.slice(i, i + 10).map(async (h) => await b.kill(h)))
  hs.length = 0
}

const dir = mkdtempSync(join(tmpdir(), 'warren-bench-vm-'))
const runDir = mkdtempSync(join(tmpdir(), 'wbv-'))
const vmOpts = { guestDir: GUEST_DIR, runDir, layersDir: join(dir, 'layers') }
const closers: Array<() => Promise<void>> = []
try {
  // Containers first, as the reference.
  const ct: ContainerBackend = createContainerBackend({ dataDir: join(dir, 'ct'), layersDir: join(dir, 'layers'), runDir: join('/run/warren/bench', `vm-${process.pid}`), cgroups: createCgroupProvider(`warren-bench-ct-${process.pid}`), pool: { max: POOL } })
  closers.push(() => ct.close())
  const ctHandles: SandboxHandle[] = []
  await ct.kill(await ct.create({ limits: CT_LIMITS })) // the default layer, built once
  progress('containers: cold creates')
  // Each of a shape of its own, so no pool serves it (the pool key holds the limits).
  const ctCold: number[] = []
  for (let i = 0; i < COLD * 4; i++) ctCold.push(...await timedCreates(ct, 1, { limits: { ...CT_LIMITS, pids: 100 + i } }, ctHandles))
  await ct.prewarm({ limits: CT_LIMITS }, POOL)
  for (let i = 0; i < 200 && ct.status().pooled < POOL; i++) await sleep(50)
  const ctPool = await timedCreates(ct, POOL, { limits: CT_LIMITS }, ctHandles)
  const ctExec = await execTimes(ct, ctHandles[0]!)
  await killAll(ct, ctHandles)
  progress(`containers: ${N} idle`)
  const ctPidsBefore = new Set(readdirSync('/proc'))
  await timedCreates(ct, N, { limits: { ...CT_LIMITS, pids: 66 } }, ctHandles)
  await sleep(2000)
  const ctPids = readdirSync('/proc').filter((p) => /^\d+$/.test(p) && !ctPidsBefore.has(p))
  const ctRssKiB = ctPids.reduce((s, p) => s + memKiB(Number(p)).rss, 0) / N
  await killAll(ct, ctHandles)

  // Cold boots: no pool, no templates.
  const cold: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'vm-cold'), ...vmOpts, cgroups: createCgroupProvider(`warren-bench-vmc-${process.pid}`), pool: { max: 0 }, templates: false })
  closers.push(() => cold.close())
  const accel = cold.status().accel
  const coldHandles: SandboxHandle[] = []
  progress('microvm: cold boots')
  await cold.guest()
  const vmCold = await timedCreates(cold, COLD, { limits: VM_LIMITS }, coldHandles)
  const vmExec = await execTimes(cold, coldHandles[0]!)
  await killAll(cold, coldHandles)
  await cold.close()

  // Saved snapshots (templates), without a pool: every create a restore.
  const vm: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'vm'), ...vmOpts, cgroups: createCgroupProvider(`warren-bench-vm-${process.pid}`), pool: { max: 0 } })
  closers.push(() => vm.close())
  const handles: SandboxHandle[] = []
  progress('microvm: the template')
  const t0 = performance.now()
  handles.push(await vm.create({ limits: VM_LIMITS }))
  const firstMs = performance.now() - t0
  progress('microvm: creates from the saved snapshot')
  const vmRestore = await timedCreates(vm, RESTORE, { limits: VM_LIMITS }, handles)
  await killAll(vm, handles)
  await vm.close()
  // The warm pool (the default), refilled by restores.
  const pooled: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'vm-pool'), ...vmOpts, cgroups: createCgroupProvider(`warren-bench-vmp-${process.pid}`), pool: { max: POOL } })
  closers.push(() => pooled.close())
  progress('microvm: the warm pool')
  await pooled.prewarm({ limits: VM_LIMITS }, POOL)
  for (let i = 0; i < 1200 && pooled.status().pooled < POOL; i++) await sleep(100)
  const vmPool = await timedCreates(pooled, POOL, { limits: VM_LIMITS }, handles)
  await killAll(pooled, handles)
  await pooled.close()

  // Density: N idle VMs restored from one template, alive at once.
  const dense: MicrovmBackend = createMicrovmBackend({ dataDir: join(dir, 'vm-dense'), ...vmOpts, cgroups: createCgroupProvider(`warren-bench-vmd-${process.pid}`), pool: { max: 0 } })
  closers.push(() => dense.close())
  await dense.kill(await dense.create({ limits: VM_LIMITS })) // the template
  const availBefore = memAvailableKiB()
  const dense0 = performance.now()
  for (let i = 0; i < N; i++) {
    handles.push(await dense.create({ limits: VM_LIMITS }))
    if (i % 10 === 9) progress(`microvm density: ${i + 1}/${N} VMs`)
  }
  const denseS = (performance.now() - dense0) / 1000
  await sleep(10_000) // idle: what boot-time allocations the guests free is given back or not by now
  let alive = 0
  for (const h of handles) if ((await dense.exec(h, ['true']).catch(() => ({ exitCode: -1 }))).exitCode === 0) alive++
  const mems = handles.map((h) => memKiB(dense.vm(h)!.pid))
  const pssKiB = mems.reduce((s, m) => s + m.pss, 0) / N
  const rssKiB = mems.reduce((s, m) => s + m.rss, 0) / N
  const availDropKiB = (availBefore - memAvailableKiB()) / N
  const templateKiB = heldGuestRamKiB()
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  progress('reclaiming')
  await killAll(dense, handles)
  await dense.close()
  progressDone()

  console.log(JSON.stringify({
    bench: 'microvm',
    accel,
    cold_boot_p50_ms: Math.round(p50(vmCold)),
    container_create_p50_ms: round(p50(ctCold)),
    pool_create_p50_ms: round(p50(vmPool)),
    container_pool_create_p50_ms: round(p50(ctPool), 2),
    snapshot_create_p50_ms: Math.round(p50(vmRestore)),
    first_create_with_template_ms: Math.round(firstMs),
    exec_true_p50_ms: round(p50(vmExec)),
    container_exec_true_p50_ms: round(p50(ctExec), 2),
    idle_vms: N,
    idle_vms_alive: alive,
    idle_vm_pss_mib: round(pssKiB / 1024),
    idle_vm_rss_mib: round(rssKiB / 1024),
    idle_vm_host_mib: round(availDropKiB / 1024),
    template_ram_mib: round(templateKiB / 1024),
    guest_memory_mib: VM_LIMITS.memoryMiB,
    container_idle_rss_mib: round(ctRssKiB / 1024, 2),
    density_create_s: round(denseS),
    loadavg_at_density: load
  }))
} finally {
  for (const close of closers.reverse()) await close().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
  rmSync(runDir, { recursive: true, force: true })
}
