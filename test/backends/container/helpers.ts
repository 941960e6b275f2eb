/**
 * Helpers of the container tests: real sandboxes (root only) on the busybox layer, started with
 * `defer`red destroy, and the end-of-file check that nothing was left behind on the host.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import {
  connectAgent, ContainerDefaults, destroySandbox, isAlive, launchSandbox,
  type AgentClient, type AgentExecOptions, type AgentExecResult, type LaunchedSandbox, type LaunchSandboxOptions
} from '../../../src/backends/container/index.js'
import { buildBusyboxLayer } from '../../../src/images/index.js'
import { timed, type Cleanup } from '../../support/index.js'

/** Why these tests cannot run here, or undefined when they can. */
export const skipReason: string | undefined =
  process.getuid?.() !== 0
    ? 'not root'
    : !existsSync(ContainerDefaults.agentPath)
        ? `no agent at ${ContainerDefaults.agentPath} (run node scripts/setup.mjs)`
        : !existsSync('/usr/bin/mkfs.erofs')
            ? 'no mkfs.erofs (erofs-utils)'
            : !existsSync('/bin/busybox') ? 'no busybox (busybox-static)' : undefined

/** Registers a uvu test, or skips it when sandboxes cannot run here (the reason is printed once). */
export function sandboxTest (name: string, fn: () => Promise<void>): void {
  if (skipReason === undefined) test(name, fn)
  else test.skip(name, fn)
}
if (skipReason !== undefined) process.stderr.write(`container tests skipped: ${skipReason}\n`)

export const text = (b: Uint8Array): string => new TextDecoder().decode(b)
export const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

/** Layers shared by all test files (built once, reused while busybox is unchanged). */
export const layersDir = join(tmpdir(), 'warren-test-layers')
let layer: Promise<string> | undefined
export function busyboxLayer (): Promise<string> {
  layer ??= mkdir(layersDir, { recursive: true }).then(() => buildBusyboxLayer(layersDir))
  return layer
}

/** This file's run directory: short, so socket paths stay under 108 bytes. */
let runDirP: Promise<string> | undefined
export function runDir (): Promise<string> {
  runDirP ??= mkdtemp(join(tmpdir(), 'wct-'))
  return runDirP
}

interface Started { sb: LaunchedSandbox, pidNs: string }
const started: Started[] = []
const mountsAtStart = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
let counter = 0

/** A fresh sandbox id, unique on this host. */
export function nextId (): string {
  return `t${process.pid}-${++counter}`
}

/** Launches a sandbox (busybox layer, 64 MiB disk unless given), remembered for the leftover check. */
export async function launch (defer: Cleanup['defer'], opts: Partial<LaunchSandboxOptions> = {}): Promise<LaunchedSandbox> {
  const sb = await launchSandbox({ id: nextId(), layers: [await busyboxLayer()], runDir: await runDir(), diskMiB: 64, ...opts })
  started.push({ sb, pidNs: readlinkSync(`/proc/${sb.pid}/ns/pid`) })
  defer(() => destroySandbox(sb))
  return sb
}

/** Launches a sandbox and connects to its agent; both are released by `defer`. */
export async function startSandbox (defer: Cleanup['defer'], opts: Partial<LaunchSandboxOptions> = {}): Promise<{ sb: LaunchedSandbox, client: AgentClient }> {
  const sb = await launch(defer, opts)
  const client = await connectAgent(sb.socketPath)
  defer(() => client.close())
  return { sb, client }
}

/** What `run` collects: the result, both streams, and every chunk in arrival order. */
export interface Ran {
  result: AgentExecResult
  stdout: string
  stderr: string
  events: Array<['out' | 'err', string]>
}

/** Runs a command and collects its output as text. */
export async function run (client: AgentClient, argv: string[], opts: AgentExecOptions = {}): Promise<Ran> {
  const events: Ran['events'] = []
  let stdout = ''
  let stderr = ''
  const result = await client.exec(argv, opts, {
    onStdout: (c) => { const s = text(c); stdout += s; events.push(['out', s]) },
    onStderr: (c) => { const s = text(c); stderr += s; events.push(['err', s]) }
  })
  return { result, stdout, stderr, events }
}

/** Runs `sh -c script` and returns its stdout, failing the test on a non-zero exit. */
export async function sh (client: AgentClient, script: string, opts: AgentExecOptions = {}): Promise<string> {
  const r = await run(client, ['sh', '-c', script], opts)
  assert.is(r.result.exitCode, 0, `sh -c ${JSON.stringify(script)} exited ${r.result.exitCode}: ${r.stderr}`)
  return r.stdout
}

/** Host processes in the pid namespace of one of this file's sandboxes. */
function processesInSandboxes (): number[] {
  const ours = new Set(started.map((s) => s.pidNs))
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (!ours.has(readlinkSync(`/proc/${name}/ns/pid`))) continue
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0]
      if (state !== 'Z') found.push(Number(name))
    } catch { /* ended while we looked */ }
  }
  return found
}

/**
 * Registers the file's last test: every sandbox it started is gone (no process of their pid
 * namespaces remains), the host's mount table gained nothing of ours, and the run directory is
 * empty. Mount lines are compared whole; only new ones that could be ours (erofs, overlay, our
 * tmpfs names, our directories) count, so other work on the machine cannot fail this.
 */
export function registerLeftoverCheck (): void {
  sandboxTest('leaves no processes, mounts or directories on the host', timed(15_000, async () => {
    for (const { sb } of started) assert.not.ok(await isAlive(sb.pid, sb.startTime), `sandbox ${sb.id} (pid ${sb.pid}) is still running`)
    assert.equal(processesInSandboxes(), [], 'processes of our sandboxes remain')
    const before = new Set(mountsAtStart)
    const dir = await runDir()
    const gained = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
      .filter((l) => !before.has(l))
      .filter((l) => / - (erofs|overlay) /.test(l) || /warren-|wct-/.test(l) || l.includes(dir) || l.includes(layersDir))
    assert.equal(gained, [], 'the host gained mounts')
    assert.equal(await readdir(dir), [], 'sandbox directories remain')
    await rm(dir, { recursive: true, force: true })
  }))
}
