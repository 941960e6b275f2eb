/**
 * The cgroups module against real cgroups (root only): detection on this host, limits written
 * in the version each controller lives in, an OOM kill confined to its group, the pids limit,
 * killAll (cgroup.kill and the freeze + SIGKILL path), removal and orphan reclaim. Layouts of
 * other hosts (v2 only, v1 with cpu,cpuacct) are checked from mountinfo fixtures.
 *
 * Every group lives under a parent of this process's own (`warren-test-cg-<pid>`), removed
 * by the defer of the test that made it; the last test asserts nothing is left.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import {
  createCgroupProvider, createSandboxCgroup, describeLayout, detectLayout, layoutFrom, layoutMode, listSandboxCgroups,
  openSandboxCgroup, planLimitWrites, reclaimOrphans, removeParentGroups, toKernelLimits,
  type CgroupLayout, type SandboxCgroupHandle, type SandboxLimits
} from '../../../src/backends/container/cgroups/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor, type Cleanup } from '../../support/index.js'

const PARENT = `warren-test-cg-${process.pid}`
const PROVIDER_PARENT = `${PARENT}-provider`
const layout = detectLayout()
const why = process.getuid?.() !== 0
  ? 'not root'
  : (['memory', 'cpu', 'pids'] as const).some((c) => layout[c] === undefined) ? 'memory, cpu or pids controller missing' : undefined
if (why !== undefined) console.log(`cgroup tests on real groups skipped: ${why}`)
const rtest = why === undefined ? test : test.skip

let counter = 0
/** A group name unique in this file. */
const nextName = (what: string): string => `t${++counter}-${what}`

/** Creates a group under this file's parent; removed when the test ends, whatever happened. */
async function group (defer: Cleanup['defer'], what: string, limits: SandboxLimits = {}): Promise<SandboxCgroupHandle> {
  const g = await createSandboxCgroup(nextName(what), limits, { parent: PARENT })
  defer(() => g.remove())
  return g
}

interface Child {
  pid: number
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
  output (): string
}

/**
 * Runs `sh -c script` inside `g`: the shell waits on stdin until its pid has been added to the
 * group, so everything the script does runs inside from its first instruction.
 */
async function spawnIn (defer: Cleanup['defer'], g: SandboxCgroupHandle, script: string): Promise<Child> {
  const child = spawn('sh', ['-c', `read go; ${script}`], { stdio: ['pipe', 'pipe', 'pipe'] })
  defer(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  let output = ''
  child.stdout.on('data', (b: Buffer) => { output += b.toString() })
  child.stderr.on('data', (b: Buffer) => { output += b.toString() })
  child.stdin.on('error', () => {}) // the shell may die before reading
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
  await new Promise((resolve, reject) => { child.once('spawn', resolve); child.once('error', reject) })
  await g.addProcess(child.pid!)
  child.stdin.write('go\n')
  return { pid: child.pid!, exited, output: () => output }
}

const read = (dir: string | undefined, file: string): string => readFileSync(join(dir!, file), 'utf8').trim()

async function rejects (p: Promise<unknown>): Promise<unknown> {
  try { await p } catch (err) { return err }
  throw new Error('expected a rejection')
}

// --- layouts from fixtures: any host ---

const V2_ONLY = [
  '25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw',
  '29 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot'
].join('\n')

const V1_COMOUNTED = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct',
  '35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '36 31 0:32 / /mnt/memory\\040all rw,relatime - cgroup cgroup rw,memory',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd'
].join('\n')

const PROC_CGROUPS = '#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\ncpuacct\t2\t1\t1\nmemory\t4\t9\t1\npids\t8\t1\t1\nfreezer\t0\t1\t1\n'

test('a v2-only host: memory, cpu, pids and the freezer in the unified hierarchy, one directory per group', () => {
  const l = layoutFrom(V2_ONLY, PROC_CGROUPS.replace(/\t[1-9]\t/g, '\t0\t'), (p) => p === '/sys/fs/cgroup/cgroup.controllers' ? 'cpuset cpu io memory hugetlb pids rdma misc\n' : undefined)
  for (const c of ['memory', 'cpu', 'pids', 'freezer', 'unified'] as const) assert.equal(l[c], { version: 2, mount: '/sys/fs/cgroup', root: '/' }, c)
  assert.is(l.cpuacct, undefined)
  assert.is(layoutMode(l), 'v2')
  const g = openSandboxCgroup('sb1', { layout: l, parent: 'warren' })
  assert.equal(g.dirs, ['/sys/fs/cgroup/warren/sb1'])
  assert.equal(g.procsFiles, ['/sys/fs/cgroup/warren/sb1/cgroup.procs'])
  assert.is(g.dirOf('cpu'), '/sys/fs/cgroup/warren/sb1')
})

test('a v2 host whose unified root does not offer pids: pids is absent, not guessed', () => {
  const l = layoutFrom(V2_ONLY, undefined, () => 'cpu memory\n')
  assert.ok(l.memory !== undefined && l.cpu !== undefined)
  assert.is(l.pids, undefined)
})

test('a v1 host: cpu,cpuacct share one hierarchy, the mount showing the root is preferred, escapes decoded', () => {
  const l = layoutFrom(V1_COMOUNTED, PROC_CGROUPS, () => undefined)
  assert.equal(l.cpu, { version: 1, mount: '/sys/fs/cgroup/cpu,cpuacct', root: '/', controllers: ['cpu', 'cpuacct'] })
  assert.is(l.cpuacct?.mount, '/sys/fs/cgroup/cpu,cpuacct')
  assert.equal(l.memory, { version: 1, mount: '/mnt/memory all', root: '/', controllers: ['memory'] })
  assert.is(l.freezer, undefined, 'no freezer mounted and no unified hierarchy')
  assert.is(l.unified, undefined)
  assert.is(layoutMode(l), 'v1')
  // Without a unified hierarchy CPU time comes from cpuacct, which here shares cpu's directory.
  const g = openSandboxCgroup('sb1', { layout: l, parent: 'warren' })
  assert.equal(g.dirs, ['/mnt/memory all/warren/sb1', '/sys/fs/cgroup/cpu,cpuacct/warren/sb1', '/sys/fs/cgroup/pids/warren/sb1'])
  assert.is(g.dirOf('cpuacct'), '/sys/fs/cgroup/cpu,cpuacct/warren/sb1')
})

test('limit plans: v2 memory.max + swap.max 0 + oom.group, cpu.max "quota period"; v1 memsw lifted first', () => {
  const k = toKernelLimits({ memoryMiB: 64, cpus: 0.5, pids: 8 })
  assert.equal(planLimitWrites('memory', 2, k, { oomGroup: true }), [
    { file: 'memory.max', value: '67108864', optional: false },
    { file: 'memory.swap.max', value: '0', optional: true },
    { file: 'memory.oom.group', value: '1', optional: true }
  ])
  assert.equal(planLimitWrites('cpu', 2, k, { oomGroup: true }), [{ file: 'cpu.max', value: '50000 100000', optional: false }])
  assert.equal(planLimitWrites('pids', 2, k, { oomGroup: true }), [{ file: 'pids.max', value: '8', optional: false }])
  assert.equal(planLimitWrites('memory', 1, k, { oomGroup: true }).map((w) => `${w.file}=${w.value}`),
    ['memory.memsw.limit_in_bytes=-1', 'memory.limit_in_bytes=67108864', 'memory.memsw.limit_in_bytes=67108864'])
  assert.equal(planLimitWrites('cpu', 1, k, { oomGroup: true }).map((w) => `${w.file}=${w.value}`), ['cpu.cfs_period_us=100000', 'cpu.cfs_quota_us=50000'])
  const none = toKernelLimits({})
  assert.equal(planLimitWrites('cpu', 2, none, { oomGroup: false }), [{ file: 'cpu.max', value: 'max 100000', optional: false }])
  assert.equal(planLimitWrites('memory', 1, none, { oomGroup: false }).map((w) => w.value), ['-1', '-1', '-1'])
  assert.is(planLimitWrites('pids', 1, none, { oomGroup: false })[0]!.value, 'max')
  assert.is(toKernelLimits({ cpus: 0.001 }).cpuQuotaUs, 1000, 'raised to the kernel minimum')
  assert.is(toKernelLimits({ cpus: 2.5 }).cpuQuotaUs, 250000)
})

test('bad limits, names and parents are INVALID_ARGUMENT; a limit the host cannot honour is UNSUPPORTED', async () => {
  for (const bad of [{ memoryMiB: -1 }, { cpus: Number.NaN }, { pids: 1.5 }, { cpus: Infinity }]) {
    assert.ok(isWarrenError(await rejects(createSandboxCgroup('ok', bad, { parent: PARENT })), ErrorCodes.INVALID_ARGUMENT), JSON.stringify(bad))
  }
  for (const name of ['', '.', '..', 'a/b', 'x'.repeat(64), 'sp ace']) {
    assert.ok(isWarrenError(await rejects(createSandboxCgroup(name, {}, { parent: PARENT })), ErrorCodes.INVALID_ARGUMENT), name)
  }
  assert.ok(isWarrenError(await rejects(createSandboxCgroup('ok', {}, { parent: '../etc' })), ErrorCodes.INVALID_ARGUMENT))
  const noPids: CgroupLayout = { memory: { version: 2, mount: '/nonexistent', root: '/' } }
  const err = await rejects(createSandboxCgroup('ok', { pids: 8 }, { parent: PARENT, layout: noPids }))
  assert.ok(isWarrenError(err, ErrorCodes.UNSUPPORTED), String(err))
  assert.equal((err as { details?: unknown }).details, { controllers: ['pids'] })
})

// --- real groups on this host ---

rtest('detection on this host finds memory, cpu and pids and says where each lives', () => {
  process.stdout.write(`\n${describeLayout(layout)}\nmode: ${layoutMode(layout)}\n`)
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
  assert.equal(layoutFrom(mounts, readFileSync('/proc/cgroups', 'utf8'), (p) => readFileSync(p, 'utf8')), layout)
  // Independent evidence: a v1 controller shows in this process's /proc/self/cgroup line of its
  // hierarchy; a v2 one is offered by the unified root.
  const ownV1 = readFileSync('/proc/self/cgroup', 'utf8').split('\n').map((l) => l.split(':')[1] ?? '').filter((c) => c !== '')
  for (const c of ['memory', 'cpu', 'pids'] as const) {
    const p = layout[c]!
    assert.ok(mounts.includes(` ${p.mount} `), `${c}: ${p.mount} is a mount point`)
    assert.ok(existsSync(join(p.mount, 'cgroup.procs')), `${c}: ${p.mount} is a cgroup hierarchy`)
    if (p.version === 1) assert.ok(ownV1.some((list) => list.split(',').includes(c)), `${c}: in a v1 hierarchy`)
    else assert.ok(read(p.mount, 'cgroup.controllers').split(' ').includes(c), `${c}: offered by the unified root`)
  }
})

rtest('a group exists in every hierarchy with its limits; creating it again re-limits it', timed(10_000, async (defer) => {
  const g = await group(defer, 'limits', { memoryMiB: 64, cpus: 0.5, pids: 8 })
  for (const d of g.dirs) assert.ok(existsSync(join(d, 'cgroup.procs')), d)
  const used = [layout.memory, layout.cpu, layout.pids, layout.freezer, layout.unified ?? layout.cpuacct]
  assert.is(g.dirs.length, new Set(used.filter((p) => p !== undefined).map((p) => p.mount)).size, 'one directory per hierarchy')
  const mem = g.dirOf('memory'); const cpu = g.dirOf('cpu'); const pids = g.dirOf('pids')
  if (layout.memory!.version === 1) {
    assert.is(read(mem, 'memory.limit_in_bytes'), String(64 * 1024 * 1024))
    if (existsSync(join(mem!, 'memory.memsw.limit_in_bytes'))) assert.is(read(mem, 'memory.memsw.limit_in_bytes'), String(64 * 1024 * 1024), 'no swap')
  } else {
    assert.is(read(mem, 'memory.max'), String(64 * 1024 * 1024))
    if (existsSync(join(mem!, 'memory.swap.max'))) assert.is(read(mem, 'memory.swap.max'), '0', 'no swap')
    assert.is(read(mem, 'memory.oom.group'), '1')
  }
  const cpuValue = (): string => layout.cpu!.version === 1 ? `${read(cpu, 'cpu.cfs_quota_us')} ${read(cpu, 'cpu.cfs_period_us')}` : read(cpu, 'cpu.max')
  assert.is(cpuValue(), '50000 100000')
  assert.is(read(pids, 'pids.max'), '8')

  const again = await createSandboxCgroup(g.name, { cpus: 1.5 }, { parent: PARENT })
  assert.equal(again.dirs, g.dirs)
  assert.is(cpuValue(), '150000 100000')
  assert.is(read(pids, 'pids.max'), 'max')
  const unlimited = layout.memory!.version === 1 ? read(mem, 'memory.limit_in_bytes') : read(mem, 'memory.max')
  assert.ok(unlimited === 'max' || Number(unlimited) > 2 ** 60, unlimited)
}))

rtest('a memory hog in a 64 MiB group is OOM-killed, oomKilled() says so, and this process lives', timed(30_000, async (defer) => {
  const g = await group(defer, 'oom', { memoryMiB: 64 })
  const quiet = await group(defer, 'quiet', { memoryMiB: 64 })
  // tail keeps a line that never ends (/dev/zero has no newline) in memory: it grows until killed.
  const hog = await spawnIn(defer, g, 'exec tail /dev/zero')
  const sleeper = await spawnIn(defer, quiet, 'exec sleep 1000')
  const end = await hog.exited
  assert.is(end.signal, 'SIGKILL', JSON.stringify(end))
  assert.ok(await g.oomKilled())
  const events = await g.events()
  assert.ok(events.oomKills >= 1, JSON.stringify(events))
  // v2 counts limit hits in memory.events; v1 memory.failcnt stays 0 on this kernel (6.18) even then.
  if (layout.memory!.version === 2) assert.ok(events.memoryLimitHits >= 1, JSON.stringify(events))
  const usage = await g.usage()
  assert.ok(usage.memoryPeakBytes === undefined || usage.memoryPeakBytes <= 64 * 1024 * 1024 + 4096, JSON.stringify(usage))
  assert.not.ok(await quiet.oomKilled(), 'the other group saw no OOM')
  assert.equal(await quiet.pids(), [sleeper.pid])
  assert.ok(process.memoryUsage().rss > 0, 'the test process is alive')
}))

rtest('a group with pids.max 8 refuses forks past it', timed(20_000, async (defer) => {
  const g = await group(defer, 'pids', { pids: 8 })
  const sh = await spawnIn(defer, g, 'for i in $(seq 20); do sleep 1000 & done; echo all forked; wait')
  // dash gives up on the first refused fork ("Cannot fork") and exits; the sleeps it made stay.
  const end = await sh.exited
  assert.is.not(end.code, 0, JSON.stringify(end))
  await waitFor(() => /fork/i.test(sh.output()), 5000, 'the fork error on stderr')
  assert.not.match(sh.output(), /all forked/)
  const left = await g.pids()
  assert.ok(left.length >= 1 && left.length < 8, `sleeps left: ${left.length}`)
  const usage = await g.usage()
  assert.is(usage.pids, left.length)
  assert.ok((await g.events()).pidsLimitHits >= 1)
  await g.killAll()
  assert.equal(await g.pids(), [])
}))

rtest('usage reports memory, pids and CPU time used by the group', timed(20_000, async (defer) => {
  const g = await group(defer, 'usage')
  const busy = await spawnIn(defer, g, 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done')
  assert.equal(await busy.exited, { code: 0, signal: null })
  const usage = await g.usage()
  assert.ok(usage.cpuUsec !== undefined && usage.cpuUsec > 0, JSON.stringify(usage))
  assert.is(usage.pids, 0)
  assert.ok(usage.memoryBytes !== undefined && usage.memoryBytes >= 0)
  assert.ok(usage.memoryPeakBytes !== undefined && usage.memoryPeakBytes > 0, JSON.stringify(usage))
}))

rtest('killAll empties a group of several processes (cgroup.kill where the kernel has it)', timed(20_000, async (defer) => {
  const g = await group(defer, 'kill')
  const sh = await spawnIn(defer, g, 'sleep 1000 & sleep 1000 & sleep 1000 & sleep 1000 & echo ready; wait')
  await waitFor(() => sh.output().includes('ready'), 5000, 'ready')
  assert.is((await g.pids()).length, 5)
  await g.killAll()
  assert.equal(await g.pids(), [])
  assert.is((await sh.exited).signal, 'SIGKILL')
  await g.killAll() // nothing left: returns at once
}))

rtest('killAll by freezing and signals empties a group whose processes fork all the time', timed(20_000, async (defer) => {
  const g = await group(defer, 'storm', { pids: 64 })
  const shells: Child[] = []
  for (let i = 0; i < 3; i++) shells.push(await spawnIn(defer, g, 'echo up; while :; do /bin/true; done'))
  await waitFor(() => shells.every((s) => s.output().includes('up')), 5000, 'the loops')
  await g.killAll({ via: 'signals' })
  assert.equal(await g.pids(), [])
  for (const s of shells) assert.is((await s.exited).signal, 'SIGKILL')
  const freezer = g.dirOf('freezer')
  if (freezer !== undefined && layout.freezer?.version === 1) assert.is(read(freezer, 'freezer.state'), 'THAWED', 'not left frozen')
}))

rtest('remove kills what runs, leaves no directory behind in any hierarchy, and is idempotent', timed(20_000, async (defer) => {
  const g = await createSandboxCgroup(nextName('remove'), { memoryMiB: 32, pids: 16 }, { parent: PARENT })
  defer(() => g.remove())
  const sh = await spawnIn(defer, g, 'sleep 1000 & exec sleep 1000')
  await waitFor(async () => (await g.pids()).length === 2, 5000, 'two sleeps')
  await g.remove()
  for (const d of g.dirs) assert.not.ok(existsSync(d), d)
  assert.is((await sh.exited).signal, 'SIGKILL')
  await g.remove()
  await g.killAll()
  assert.equal(await g.pids(), [])
  assert.ok(isWarrenError(await rejects(g.addProcess(process.pid)), ErrorCodes.NOT_FOUND), 'joining a removed group fails')
}))

rtest('reclaimOrphans removes leftover groups (and their processes) not kept, under its prefix only', timed(20_000, async (defer) => {
  const prefix = `t${++counter}-orphan-`
  const orphan = await createSandboxCgroup(`${prefix}a`, { memoryMiB: 32 }, { parent: PARENT })
  const kept = await createSandboxCgroup(`${prefix}kept`, {}, { parent: PARENT })
  const other = await group(defer, 'not-matching')
  defer(() => orphan.remove())
  defer(() => kept.remove())
  const sh = await spawnIn(defer, orphan, 'exec sleep 1000')
  // A group left in one hierarchy only (a crash mid-create) is found too.
  const partial = join(layout.pids!.mount, PARENT, `${prefix}partial`)
  await mkdir(partial)
  defer(() => openSandboxCgroup(`${prefix}partial`, { parent: PARENT }).remove())

  assert.equal(await listSandboxCgroups(prefix, { parent: PARENT }), [`${prefix}a`, `${prefix}kept`, `${prefix}partial`])
  const reclaimed = await reclaimOrphans(prefix, new Set([`${prefix}kept`]), { parent: PARENT })
  assert.equal(reclaimed, [`${prefix}a`, `${prefix}partial`])
  for (const d of orphan.dirs) assert.not.ok(existsSync(d), d)
  assert.not.ok(existsSync(partial))
  for (const d of [...kept.dirs, ...other.dirs]) assert.ok(existsSync(d), d)
  assert.is((await sh.exited).signal, 'SIGKILL')
}))

rtest('the backend provider: create, open after a restart, reclaim, close removes its parent', timed(20_000, async (defer) => {
  const provider = createCgroupProvider(PROVIDER_PARENT)
  defer(() => removeParentGroups({ parent: PROVIDER_PARENT }))
  const a = await provider.create('sba', { cpus: 0.25, memoryMiB: 64, diskMiB: 16, pids: 32 } as SandboxLimits)
  defer(() => a.remove())
  await provider.create('sbb', { pids: 4 })
  assert.equal(a.dirs, openSandboxCgroup('sba', { parent: PROVIDER_PARENT }).dirs)
  assert.ok(provider.open('sba') !== undefined)
  assert.is(provider.open('never-made'), undefined)
  assert.is(await a.oomKills(), 0)
  await provider.close()
  assert.ok(existsSync(join(layout.memory!.mount, PROVIDER_PARENT)), 'a parent with groups stays')
  await provider.reclaimOrphans(new Set(['sba']))
  assert.is(provider.open('sbb'), undefined)
  await a.remove()
  await provider.close()
  for (const p of Object.values(layout)) assert.not.ok(existsSync(join(p.mount, PROVIDER_PARENT)), p.mount)
}))

rtest('nothing is left: no test groups and no test parent in any hierarchy', async () => {
  const leftovers = await listSandboxCgroups('', { parent: PARENT })
  // Clean up even when the assertion below fails, so a failed run does not leak into the next.
  await reclaimOrphans('', new Set(), { parent: PARENT }).catch(() => {})
  assert.equal(leftovers, [], 'groups left by the tests')
  assert.ok(await removeParentGroups({ parent: PARENT }))
  for (const p of Object.values(layout)) {
    assert.not.ok(existsSync(join(p.mount, PARENT)), join(p.mount, PARENT))
    assert.not.ok(existsSync(join(p.mount, PROVIDER_PARENT)), join(p.mount, PROVIDER_PARENT))
    assert.equal(readdirSync(p.mount).filter((n) => n.startsWith(PARENT)), [])
  }
})

test.run()
