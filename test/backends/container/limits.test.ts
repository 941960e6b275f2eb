import { existsSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createCgroupProvider, createContainerBackend, detectLayout, type ContainerBackend } from '../../../src/backends/container/index.js'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { timed, waitFor } from '../../support/index.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container limit tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip
const PARENT = `warren-test-${process.pid}`

function backend (defer: (fn: () => unknown) => void): ContainerBackend {
  const dir = mkdtempSync(join(tmpdir(), 'warren-limits-'))
  const b = createContainerBackend({ dataDir: dir, runDir: join('/run/warren/test', String(process.pid)), cgroups: createCgroupProvider(PARENT), pool: { max: 0 } })
  defer(() => rmSync(dir, { recursive: true, force: true }))
  defer(() => b.close())
  return b
}

const limits = (over: Partial<{ cpus: number, memoryMiB: number, diskMiB: number, pids: number }> = {}) =>
  ({ cpus: 0.5, memoryMiB: 64, diskMiB: 16, pids: 64, ...over })

ctest('detection finds memory, cpu and pids, each in v1 or v2', () => {
  const layout = detectLayout()
  for (const c of ['memory', 'cpu', 'pids'] as const) {
    assert.ok(layout[c] !== undefined, `${c} found`)
    assert.ok(existsSync(layout[c]!.mount))
  }
})

ctest('a memory hog ends with reason oom; the sandbox and the node live on', timed(60_000, async (defer) => {
  const b = backend(defer)
  const h = await b.create({ limits: limits({ memoryMiB: 32 }) })
  // Doubling a shell string grows without bound inside the sandbox's 32 MiB.
  const r = await b.exec(h, ['sh', '-c', 'x=aaaaaaaa; while true; do x="$x$x"; done'], { timeoutMs: 30_000 })
  assert.is(r.reason, 'oom', JSON.stringify(r))
  assert.is(r.exitCode, 137)
  const after = await b.exec(h, ['echo', 'still here'], { onStdout: () => {} })
  assert.is(after.exitCode, 0)
}))

ctest('a fork bomb meets the pids limit', timed(60_000, async (defer) => {
  const b = backend(defer)
  const h = await b.create({ limits: limits({ pids: 16 }) })
  let err = ''
  const r = await b.exec(h, ['sh', '-c', 'for i in $(seq 40); do sleep 30 & done 2>&1; echo forked; jobs | wc -l'], {
    timeoutMs: 20_000, onStdout: (c) => { err += new TextDecoder().decode(c) }, onStderr: (c) => { err += new TextDecoder().decode(c) }
  })
  assert.match(err, /can't fork|Resource temporarily unavailable/i)
  assert.is(r.reason, undefined, 'the shell itself was not killed')
}))

ctest('writing past the disk limit gives ENOSPC inside; the host is unaffected', timed(60_000, async (defer) => {
  const b = backend(defer)
  const h = await b.create({ limits: limits({ diskMiB: 8 }) })
  let out = ''
  const r = await b.exec(h, ['sh', '-c', 'dd if=/dev/zero of=/big bs=1M count=64 2>&1; ls -la /big'], { onStdout: (c) => { out += new TextDecoder().decode(c) } })
  assert.match(out, /No space left on device/)
  assert.is(r.exitCode, 0)
}))

ctest('the CPU quota is written as a fraction of a core; groups are gone after kill', timed(60_000, async (defer) => {
  const b = backend(defer)
  const h = await b.create({ limits: limits({ cpus: 0.25 }) })
  const cpu = detectLayout().cpu!
  const dir = join(cpu.mount, PARENT, h.id)
  const quota = cpu.version === 2 ? readFileSync(join(dir, 'cpu.max'), 'utf8').trim() : readFileSync(join(dir, 'cpu.cfs_quota_us'), 'utf8').trim()
  assert.ok(quota === '25000' || quota === '25000 100000', quota)
  await b.kill(h)
  assert.not.ok(existsSync(dir), 'the group is removed')
}))

ctest('a pooled sandbox takes the id it is handed out as: hostname, exec', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-pool-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const b = createContainerBackend({ dataDir: dir, runDir: join('/run/warren/test', String(process.pid)), cgroups: createCgroupProvider(PARENT), pool: { max: 2 } })
  defer(() => b.close())
  const spec = { limits: limits() }
  await b.prewarm(spec, 1)
  await waitFor(() => b.status().pooled === 1, 20_000, 'a pooled sandbox')
  const h = await b.create({ ...spec, id: 'rollout-42' })
  assert.is.not(h.id, 'rollout-42', 'the create was a claim (a launch would have used the id)')
  let out = ''
  await b.exec(h, ['hostname'], { onStdout: (c) => { out += new TextDecoder().decode(c) } })
  assert.is(out, 'rollout-42\n')
}))

ctest('nothing is left: no sandbox groups, no run directories', () => {
  const layout = detectLayout()
  for (const place of Object.values(layout)) {
    const parent = join(place.mount, PARENT)
    if (!existsSync(parent)) continue
    assert.equal(readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name), [])
    rmdirSync(parent)
  }
  const run = join('/run/warren/test', String(process.pid))
  assert.ok(!existsSync(run) || readdirSync(run).length === 0)
  if (existsSync(run)) rmdirSync(run)
})

test.run()
