/**
 * Helpers of the microvm tests: real VMs (root, QEMU, TCG here) on the busybox layer, with one
 * guest kernel kept between runs, a run directory and cgroup parent per test file, and the
 * check that nothing of a killed VM is left on the host.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createCgroupProvider, detectLayout, isAlive } from '../../../src/backends/container/index.js'
import { createMicrovmBackend, GUEST_RAM_LINK, MicrovmDefaults, microvmUnavailable, type LaunchedVm, type MicrovmBackend, type MicrovmBackendOptions } from '../../../src/backends/microvm/index.js'
import type { ExecOptions, ExecResult, SandboxHandle } from '../../../src/backends/types.js'

/** The guest kernel, initramfs and module disk, made once and kept between runs (the download is 27 MB). */
export const GUEST_DIR = '/var/tmp/warren-test-guest'

/** Why these tests cannot run here, or undefined when they can. */
export const skipReason: string | undefined = microvmUnavailable(GUEST_DIR)
if (skipReason !== undefined) process.stderr.write(`microvm tests skipped: ${skipReason}\n`)

/** Registers a uvu test, or skips it when VMs cannot run here. */
export function vmTest (name: string, fn: () => Promise<void>): void {
  if (skipReason === undefined) test(name, fn)
  else test.skip(name, fn)
}

export const text = (b: Uint8Array): string => new TextDecoder().decode(b)
export const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

/** This file's cgroup parent and run directory (short: socket paths must stay under 108 bytes). */
export const CGROUP_PARENT = `warren-vmtest-${process.pid}`
let runDirP: Promise<string> | undefined
export function runDir (): Promise<string> {
  runDirP ??= mkdtemp(join(tmpdir(), 'wvm-'))
  return runDirP
}

/**
 * A backend on `dataDir` with this file's run directory and cgroup parent; without a pool or
 * templates unless asked (every create a cold boot, so what a test measures is that).
 */
export async function newBackend (dataDir: string, over: Partial<MicrovmBackendOptions> = {}): Promise<MicrovmBackend> {
  return createMicrovmBackend({ dataDir, guestDir: GUEST_DIR, runDir: await runDir(), cgroups: createCgroupProvider(CGROUP_PARENT), pool: { max: 0 }, templates: false, ...over })
}

/** The template directory of a backend made by `newBackend` (its templates' states). */
export async function templateDir (): Promise<string> {
  return `${await runDir()}-templates`
}

/** True when something is mounted at `dir`. */
export function mounted (dir: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === dir)
}

/** QEMU's CPU time so far (user + system, all its threads), in clock ticks. */
export function qemuCpuTicks (vm: LaunchedVm): number {
  const fields = readFileSync(`/proc/${vm.pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/** Proportional and resident set sizes of a process, in KiB (smaps_rollup). */
export function memoryOf (pid: number): { pssKiB: number, rssKiB: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  const kib = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN)
  return { pssKiB: kib('Pss'), rssKiB: kib('Rss') }
}

/**
 * The saved guest RAM a VM's QEMU maps (a template's or a memory snapshot's, the node's memfd,
 * mapped private), in KiB: resident, and resident pages other processes map too (smaps).
 */
export function savedRamMapping (pid: number): { rssKiB: number, sharedKiB: number } {
  let rssKiB = 0
  let sharedKiB = 0
  let inRam = false
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head !== null) { inRam = head[1]!.startsWith(GUEST_RAM_LINK); continue }
    if (!inRam) continue
    const kib = /^(\w+):\s+(\d+) kB/.exec(line)
    if (kib?.[1] === 'Rss') rssKiB += Number(kib[2])
    if (kib?.[1] === 'Shared_Clean' || kib?.[1] === 'Shared_Dirty') sharedKiB += Number(kib[2])
  }
  return { rssKiB, sharedKiB }
}

/** What `run` collects: the result, both streams, and every chunk in arrival order. */
export interface Ran extends ExecResult {
  stdout: string
  stderr: string
  events: Array<['out' | 'err', string]>
}

/** Runs a command in a VM and collects its output as text. */
export async function run (b: MicrovmBackend, h: SandboxHandle, argv: string[], opts: ExecOptions = {}): Promise<Ran> {
  const events: Ran['events'] = []
  let stdout = ''
  let stderr = ''
  const r = await b.exec(h, argv, {
    ...opts,
    onStdout: (c) => { const s = text(c); stdout += s; events.push(['out', s]) },
    onStderr: (c) => { const s = text(c); stderr += s; events.push(['err', s]) }
  })
  return { ...r, stdout, stderr, events }
}

/** Runs `sh -c script`, failing the test on a non-zero exit; returns its stdout. */
export async function sh (b: MicrovmBackend, h: SandboxHandle, script: string, opts: ExecOptions = {}): Promise<string> {
  const r = await run(b, h, ['sh', '-c', script], opts)
  assert.is(r.exitCode, 0, `sh -c ${JSON.stringify(script)} exited ${r.exitCode}: ${r.stderr}`)
  return r.stdout
}

/** The median of some numbers. */
export function p50 (values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

/** The cgroup directories of a VM that still exist, in every hierarchy. */
export function leftoverCgroups (id: string): string[] {
  return Object.values(detectLayout()).map((p) => join(p.mount, CGROUP_PARENT, id)).filter((d) => existsSync(d))
}

/** The QEMU users leased to VMs under `dir` (qemu-jail.ts), by the directory each lease names. */
export function leasesUnder (dir: string): string[] {
  const leases = MicrovmDefaults.qemuUserLeases
  if (!existsSync(leases)) return []
  // Another test file's VM may give its lease back while this reads.
  const owner = (uid: string): string => { try { return readFileSync(join(leases, uid), 'utf8') } catch { return '' } }
  return readdirSync(leases).map(owner).filter((o) => o === dir || o.startsWith(`${dir}/`))
}

/** Asserts nothing of `vm` is left: no QEMU, no directory, no cgroup, no lease of its user. */
export async function assertGone (vm: LaunchedVm): Promise<void> {
  assert.not.ok(await isAlive(vm.pid, vm.startTime), `QEMU ${vm.pid} of ${vm.id} still runs`)
  assert.not.ok(existsSync(vm.dir), `${vm.dir} is left`)
  assert.equal(leasesUnder(vm.dir), [], 'its user is still leased')
  assert.equal(leftoverCgroups(vm.id), [], 'its cgroups are left')
}

/** The file's last check: the run directory and the cgroup parent are empty, then removed. */
export function registerLeftoverCheck (): void {
  vmTest('leaves no VM directory or cgroup behind', async () => {
    const dir = await runDir()
    assert.equal(existsSync(dir) ? readdirSync(dir) : [], [], 'VM directories remain')
    assert.equal(leasesUnder(dir), [], 'QEMU users are still leased')
    await rm(dir, { recursive: true, force: true })
    for (const templates of [await templateDir(), `${await templateDir()}-memory`]) {
      assert.not.ok(mounted(templates), `nothing is mounted at ${templates}`)
      assert.not.ok(existsSync(templates), `the templates' directory ${templates} is removed`)
    }
    for (const p of Object.values(detectLayout())) {
      const parent = join(p.mount, CGROUP_PARENT)
      if (existsSync(parent)) assert.equal(readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name), [], `groups under ${parent}`)
    }
  })
}
