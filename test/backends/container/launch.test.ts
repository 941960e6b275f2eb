/**
 * Launching and destroying sandboxes: time to ready, layer stacking, cgroups joined and removed,
 * clear failures that leave nothing behind, and destroy that leaves no process and no mount.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import {
  connectAgent, destroySandbox, isAlive, launchSandbox, type LaunchedSandbox
} from '../../../src/backends/container/index.js'
import { buildErofsLayer } from '../../../src/images/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { busyboxLayer, launch, nextId, registerLeftoverCheck, run, runDir, sandboxTest, sh, startSandbox, text } from './helpers.js'

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Host PIDs whose command line mentions `needle` (a sandbox id, before the agent wipes it). */
function processesMentioning (needle: string): number[] {
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.split(') ')[1]?.[0] === 'Z') continue
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(needle)) found.push(Number(name))
    } catch { /* gone */ }
  }
  return found
}

sandboxTest('launch to ready is fast; the median of 20 is reported', timed(30_000, async (defer) => {
  const launchMs: number[] = []
  const pingMs: number[] = []
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now()
    const sb = await launch(defer)
    const client = await connectAgent(sb.socketPath)
    await client.ping()
    pingMs.push(performance.now() - t0)
    launchMs.push(sb.launchMs)
    await client.close()
    await destroySandbox(sb)
  }
  const result = { launch_to_ready_p50_ms: +median(launchMs).toFixed(2), launch_to_ping_p50_ms: +median(pingMs).toFixed(2) }
  process.stdout.write(`\n${JSON.stringify(result)}\n`)
  assert.ok(result.launch_to_ready_p50_ms < 200, JSON.stringify(result))
}))

sandboxTest('destroy kills every process of the sandbox and leaves no mount; it is idempotent', timed(15_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  await sh(client, 'sleep 1000 & sleep 1001 & (sleep 1002 &) ; echo data > /tmp/f')
  const pidNs = readlinkSync(`/proc/${sb.pid}/ns/pid`)
  const mntNs = readlinkSync(`/proc/${sb.pid}/ns/mnt`)
  const inNs = (): number[] => readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((n) => {
    try { return readlinkSync(`/proc/${n}/ns/pid`) === pidNs && readFileSync(`/proc/${n}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z' } catch { return false }
  }).map(Number)
  assert.ok(inNs().length >= 4, 'the agent and three sleeps')
  await client.close()
  await destroySandbox(sb)
  assert.equal(inNs(), [])
  assert.not.ok(await isAlive(sb.pid, sb.startTime))
  assert.not.ok(existsSync(sb.dir))
  // No process is left in its mount namespace either, so its mounts are gone with it.
  const inMnt = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((n) => {
    try { return readlinkSync(`/proc/${n}/ns/mnt`) === mntNs } catch { return false }
  })
  assert.equal(inMnt, [])
  await destroySandbox(sb)
}))

sandboxTest('layers stack bottom to top', timed(15_000, async (defer) => {
  const dir = await mkdtemp(join(tmpdir(), 'wct-layer-'))
  defer(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, 'marker'), 'top\n')
  await writeFile(join(dir, 'only-top'), 'yes\n')
  const top = await buildErofsLayer(dir, join(dir, '..', `${dir.split('/').pop()!}.erofs`))
  defer(() => rm(top, { force: true }))
  const { client } = await startSandbox(defer, { layers: [await busyboxLayer(), top] })
  assert.is(await sh(client, 'cat /marker /only-top; ls /bin/sh'), 'top\nyes\n/bin/sh\n')
  assert.is(text(await client.files.read('/marker')), 'top\n')
}))

sandboxTest('cgroups: the sandbox runs in the given ones, sees them as its root, and destroy removes them', timed(15_000, async (defer) => {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
  const v1pids = mounts.find((l) => / - cgroup cgroup .*\bpids\b/.test(l))?.split(' ')[4]
  const v2 = mounts.find((l) => / - cgroup2 /.test(l))?.split(' ')[4]
  const name = `warren-test-${process.pid}-${nextId()}`
  const cgroups = [v1pids, v2].filter((p): p is string => p !== undefined).map((p) => join(p, name))
  assert.ok(cgroups.length > 0, 'a cgroup hierarchy is mounted')
  const { sb, client } = await startSandbox(defer, { cgroups })
  assert.equal(sb.createdCgroups, cgroups)
  for (const cg of cgroups) assert.ok(readFileSync(join(cg, 'cgroup.procs'), 'utf8').split('\n').includes(String(sb.pid)), cg)
  // The cgroup namespace makes the sandbox's cgroup its root.
  const own = (await sh(client, 'cat /proc/self/cgroup')).trim().split('\n')
  const inside = own.filter((l) => (v1pids !== undefined && l.includes(':pids:')) || (v2 !== undefined && l.startsWith('0::')))
  assert.ok(inside.length > 0 && inside.every((l) => l.endsWith(':/')), own.join('\n'))
  if (v1pids !== undefined) {
    await writeFile(join(v1pids, name, 'pids.max'), '8')
    const r = await run(client, ['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 5 & done; wait'])
    assert.match(r.stderr, /fork|resource/i, 'the pids limit stops a fork flood')
  }
  await client.close()
  await destroySandbox(sb)
  for (const cg of cgroups) assert.not.ok(existsSync(cg), `${cg} removed`)
}))

sandboxTest('many sandboxes launch at once', timed(30_000, async (defer) => {
  const sandboxes = await Promise.all(Array.from({ length: 8 }, () => startSandbox(defer)))
  const names = await Promise.all(sandboxes.map(({ client }) => sh(client, 'hostname')))
  assert.equal(names.map((n) => n.trim()), sandboxes.map(({ sb }) => sb.id))
}))

sandboxTest('failures are clear and leave nothing behind', timed(20_000, async (defer) => {
  const dir = await runDir()
  const layer = await busyboxLayer()
  const expect = async (p: Promise<unknown>, code: string, pattern?: RegExp): Promise<void> => {
    // Should a launch succeed after all, its sandbox is not left running.
    const err = await p.then(async (v) => { if (v !== null && typeof v === 'object' && 'pid' in v) await destroySandbox(v as LaunchedSandbox) }, (e: unknown) => e)
    assert.ok(isWarrenError(err) && err.code === code, `expected ${code}, got ${String(err)}`)
    if (pattern !== undefined) assert.match((err as Error).message, pattern)
  }
  await expect(launchSandbox({ id: nextId(), layers: ['/nonexistent.erofs'], runDir: dir }), ErrorCodes.NOT_FOUND)
  await expect(launchSandbox({ id: 'bad id!', layers: [layer], runDir: dir }), ErrorCodes.INVALID_ARGUMENT)
  await expect(launchSandbox({ id: nextId(), layers: [], runDir: dir }), ErrorCodes.INVALID_ARGUMENT)
  await expect(launchSandbox({ id: 'x'.repeat(60), layers: [layer], runDir: join(dir, 'y'.repeat(40)) }), ErrorCodes.INVALID_ARGUMENT, /socket path/)
  await expect(launchSandbox({ id: nextId(), layers: [layer], runDir: dir, agentPath: '/nonexistent/warren-init' }), ErrorCodes.BACKEND_UNAVAILABLE)
  // A file that is not an EROFS image: the launcher says which mount failed.
  const junk = join(dir, 'junk.erofs')
  await writeFile(junk, Buffer.alloc(8192, 1))
  defer(() => rm(junk, { force: true }))
  const id = nextId()
  await expect(launchSandbox({ id, layers: [layer, junk], runDir: dir }), ErrorCodes.BACKEND_UNAVAILABLE, /mount .*junk\.erofs.*erofs/)
  assert.not.ok(existsSync(join(dir, id)), 'the sandbox directory is removed')
  assert.equal(processesMentioning(`--id ${id} `), [])
  // A launcher that does not finish in time is killed; the launch fails with TIMEOUT and cleans up.
  const slow = join(dir, 'slow-launcher')
  await writeFile(slow, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 })
  defer(() => rm(slow, { force: true }))
  const cut = nextId()
  const t0 = Date.now()
  await expect(launchSandbox({ id: cut, layers: [layer], runDir: dir, agentPath: slow, timeoutMs: 200 }), ErrorCodes.TIMEOUT)
  assert.ok(Date.now() - t0 < 5000)
  assert.not.ok(existsSync(join(dir, cut)))
}))

registerLeftoverCheck()
test.run()
