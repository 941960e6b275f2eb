/**
 * Helpers of the container backend tests that pause and snapshot: a backend with the real cgroup
 * provider under a per-process parent group, run directory and data directory, shell commands
 * run through it, and the end-of-file check that nothing is left on the host.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as assert from 'uvu/assert'
import {
  createCgroupProvider, createContainerBackend, detectLayout, type ContainerBackend, type ContainerBackendOptions
} from '../../../src/backends/container/index.js'
import type { ExecResult, SandboxHandle } from '../../../src/backends/types.js'
import type { Cleanup } from '../../support/index.js'

/** This file's parent cgroup and run directory (short: socket paths stay under 108 bytes). */
export const PARENT = `warren-test-${process.pid}`
export const RUN_DIR = join('/run/warren/test', String(process.pid))

/** Every data directory made here, removed by the leftover check. */
const dataDirs: string[] = []

/** A fresh data directory for a backend (journal and layer store). */
export function newDataDir (): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-snap-'))
  dataDirs.push(dir)
  return dir
}

/** A backend with cgroups (so it pauses and snapshots), closed by `defer`. */
export function makeBackend (defer: Cleanup['defer'], opts: Partial<ContainerBackendOptions> = {}): ContainerBackend {
  const b = createContainerBackend({ dataDir: opts.dataDir ?? newDataDir(), runDir: RUN_DIR, cgroups: createCgroupProvider(PARENT), pool: { max: 0 }, ...opts })
  defer(() => b.close())
  return b
}

export const text = (b: Uint8Array): string => new TextDecoder().decode(b)

/** Runs `sh -c script` and returns its result with both streams as text. */
export async function run (b: ContainerBackend, h: SandboxHandle, script: string): Promise<ExecResult & { stdout: string, stderr: string }> {
  let stdout = ''
  let stderr = ''
  const r = await b.exec(h, ['sh', '-c', script], { onStdout: (c) => { stdout += text(c) }, onStderr: (c) => { stderr += text(c) }, timeoutMs: 60_000 })
  return { ...r, stdout, stderr }
}

/** Runs `sh -c script`, fails the test on a non-zero exit, returns stdout. */
export async function sh (b: ContainerBackend, h: SandboxHandle, script: string): Promise<string> {
  const r = await run(b, h, script)
  assert.is(r.exitCode, 0, `sh -c ${JSON.stringify(script)} exited ${r.exitCode}: ${r.stderr}`)
  return r.stdout
}

/** The host pids in a sandbox's group (its freezer hierarchy): the agent and every command. */
export function groupPids (id: string): number[] {
  const place = detectLayout().freezer
  if (place === undefined) return []
  const file = join(place.mount, PARENT, id, 'cgroup.procs')
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map(Number) : []
}

/** A sandbox's freezer state as the kernel reports it: FROZEN, FREEZING or THAWED (v2: 1 or 0). */
export function freezerFile (id: string): string {
  const place = detectLayout().freezer!
  const dir = join(place.mount, PARENT, id)
  return place.version === 1 ? readFileSync(join(dir, 'freezer.state'), 'utf8').trim() : (readFileSync(join(dir, 'cgroup.events'), 'utf8').includes('frozen 1') ? 'FROZEN' : 'THAWED')
}

/** The groups left under this file's parent, per hierarchy. */
export function leftoverGroups (): string[] {
  const out: string[] = []
  for (const place of Object.values(detectLayout())) {
    const parent = join(place.mount, PARENT)
    if (!existsSync(parent)) continue
    for (const e of readdirSync(parent, { withFileTypes: true })) if (e.isDirectory()) out.push(join(parent, e.name))
  }
  return out
}

/**
 * The file's last check: no sandbox group, no run directory, no staging copy in any layer store
 * is left; then the parent groups and data directories are removed.
 */
export function checkNothingLeft (): void {
  assert.equal(leftoverGroups(), [], 'sandbox groups remain')
  for (const place of Object.values(detectLayout())) {
    const parent = join(place.mount, PARENT)
    if (existsSync(parent)) rmdirSync(parent)
  }
  assert.ok(!existsSync(RUN_DIR) || readdirSync(RUN_DIR).length === 0, 'run directories remain')
  if (existsSync(RUN_DIR)) rmdirSync(RUN_DIR)
  for (const dir of dataDirs) {
    const layers = join(dir, 'layers')
    const staged = existsSync(layers) ? readdirSync(layers).filter((n) => n.startsWith('.')) : []
    assert.equal(staged, [], `staging left in ${layers}`)
    rmSync(dir, { recursive: true, force: true })
  }
}
