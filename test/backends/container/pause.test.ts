import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createCgroupProvider, createContainerBackend, processInfo } from '../../../src/backends/container/index.js'
import { containerUnavailable } from '../../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { sleep, timed, waitFor } from '../../support/index.js'
import { checkNothingLeft, freezerFile, groupPids, leftoverGroups, makeBackend, newDataDir, PARENT, RUN_DIR, sh } from './backend-helpers.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container pause tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

/** Starts a loop that appends a timestamp to /tmp/t as fast as it can, and waits until it runs. */
const LOOP = '(while :; do date +%s%N >> /tmp/t; done) > /dev/null 2>&1 &'

/** Size of the loop's file, read from the host through a process of the sandbox (its files API is refused while paused). */
function loopBytes (id: string): number {
  const [pid] = groupPids(id)
  assert.ok(pid !== undefined, 'the sandbox has processes')
  return statSync(`/proc/${pid}/root/tmp/t`).size
}

async function rejection (p: Promise<unknown>): Promise<unknown> {
  try { await p } catch (err) { return err }
  throw new Error('expected a rejection')
}

const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

ctest('a paused sandbox stands still: its loop does not advance, its agent is not declared dead; after resume it runs on', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  assert.ok(b.snapshots, 'a backend with a freezing cgroup provider offers pause and snapshot')
  const h = await b.create({})
  let gone: string | undefined
  b.onGone?.(h, (m) => { gone = m })
  await sh(b, h, LOOP)
  await waitFor(() => existsSync(`/proc/${groupPids(h.id)[0]!}/root/tmp/t`) && loopBytes(h.id) > 0, 10_000, 'the loop writes')
  await b.pause!(h)
  assert.is(freezerFile(h.id), 'FROZEN')
  const before = loopBytes(h.id)
  await sleep(1000) // pacing: a running loop writes hundreds of lines a second
  assert.is(loopBytes(h.id), before, 'nothing was written while paused')
  assert.is(gone, undefined, 'a frozen agent is not taken for a dead one')
  await b.resume!(h)
  await waitFor(() => loopBytes(h.id) > before, 10_000, 'the loop writes again')
  assert.is(freezerFile(h.id), 'THAWED')
  assert.is((await sh(b, h, 'echo ok')), 'ok\n')
}))

ctest('pause and resume are idempotent; while paused exec and files are refused with WARREN_ERR_SANDBOX_PAUSED', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({})
  const pauses: number[] = []
  const resumes: number[] = []
  for (let i = 0; i < 5; i++) {
    let t = performance.now()
    await b.pause!(h)
    pauses.push(performance.now() - t)
    await b.pause!(h)
    const err = await rejection(b.exec(h, ['true']))
    assert.ok(isWarrenError(err, ErrorCodes.SANDBOX_PAUSED), String(err))
    assert.equal((err as { details?: unknown }).details, { id: h.id, state: 'paused' })
    assert.ok(isWarrenError(await rejection(b.files.stat(h, '/')), ErrorCodes.SANDBOX_PAUSED))
    t = performance.now()
    await b.resume!(h)
    resumes.push(performance.now() - t)
    await b.resume!(h)
    assert.is(await sh(b, h, 'echo ok'), 'ok\n')
  }
  console.log(`pause p50 ${p50(pauses).toFixed(2)} ms, resume p50 ${p50(resumes).toFixed(2)} ms (5 runs)`)
}))

ctest('kill while paused leaves nothing: no process, no cgroup, no run directory, and it does not wait out a timeout', timed(30_000, async (defer) => {
  const b = makeBackend(defer)
  const h = await b.create({})
  await sh(b, h, `${LOOP} sleep 1000 &`)
  await b.pause!(h)
  const pids = groupPids(h.id)
  assert.ok(pids.length >= 3, `agent, loop and sleep are in the group: ${pids.join(' ')}`)
  const t = performance.now()
  await b.kill(h)
  const ms = performance.now() - t
  assert.ok(ms < 2000, `kill took ${ms.toFixed(0)} ms`)
  for (const pid of pids) {
    // A zombie waiting for the host's init to reap it has released everything; anything else is a leftover.
    const info = await processInfo(pid)
    assert.ok(info === undefined || info.state === 'Z' || info.state === 'X', `pid ${pid} still runs (${info?.state ?? ''})`)
  }
  assert.equal(leftoverGroups(), [])
  assert.not.ok(existsSync(join(RUN_DIR, h.id)), 'the run directory is gone')
}))

ctest('a paused sandbox is adopted paused by a backend started again on the same data directory, resumes there, and its resumable command is taken up then', timed(30_000, async (defer) => {
  const dataDir = newDataDir()
  const first = makeBackend(defer, { dataDir })
  const h = await first.create({ meta: { who: 'first' } })
  await sh(first, h, 'echo before > /tmp/mark')
  // A resumable command under way when it is paused: its agent, frozen, cannot list it at adopt.
  let seen = ''
  void first.exec(h, ['sh', '-c', 'i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done'], {
    resume: { tag: 'count', onAck: () => {} }, onStdout: (c) => { seen += new TextDecoder().decode(c) }
  })
  await waitFor(() => seen.includes('line 5\n'), 10_000, 'the command under way')
  await first.pause!(h)
  // The first backend is not closed: as after a crash of the node agent, the sandbox lives on.
  const second = createContainerBackend({ dataDir, runDir: RUN_DIR, cgroups: createCgroupProvider(PARENT), pool: { max: 0 } })
  defer(() => second.close())
  const adopted = await second.adopt!()
  const found = adopted.find((a) => a.handle.id === h.id)
  assert.ok(found !== undefined, 'adopted')
  assert.is(found.paused, true)
  assert.equal(found.meta, { who: 'first' })
  assert.is(freezerFile(h.id), 'FROZEN', 'adopting did not thaw it')
  assert.ok(isWarrenError(await rejection(second.exec(h, ['true'])), ErrorCodes.SANDBOX_PAUSED))
  assert.is(found.execs, undefined, 'a frozen agent is not asked')
  // Its first resume lists the command, which is taken up from its first chunk, byte-exact; a second lists nothing.
  const execs = await second.resume!(h)
  assert.equal(execs?.map((x) => [x.tag, x.fromSeq]), [['count', 0]])
  let taken = ''
  assert.is((await second.reattach!(h, 'count', { fromSeq: 0, onStdout: (c) => { taken += new TextDecoder().decode(c) } })).exitCode, 0)
  assert.is(taken, Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join(''))
  assert.is(await second.resume!(h), undefined)
  assert.is(await sh(second, h, 'cat /tmp/mark'), 'before\n')
  // Adopted again, now running: not paused.
  const third = createContainerBackend({ dataDir, runDir: RUN_DIR, cgroups: createCgroupProvider(PARENT), pool: { max: 0 } })
  defer(() => third.close())
  assert.is((await third.adopt!()).find((a) => a.handle.id === h.id)?.paused, undefined)
  await third.kill(h)
}))

ctest('without a cgroup provider pause and snapshot are refused with WARREN_ERR_UNSUPPORTED, naming no field', timed(30_000, async (defer) => {
  const b = makeBackend(defer, { cgroups: undefined })
  assert.not.ok(b.snapshots)
  const h = await b.create({})
  for (const p of [b.pause!(h), b.snapshot!(h), b.resume!(h)]) {
    const err = await rejection(p)
    assert.ok(isWarrenError(err, ErrorCodes.UNSUPPORTED), String(err))
    assert.is((err as { details?: { field?: string } }).details?.field, undefined)
    assert.match((err as Error).message, /cgroup freezer/)
  }
  assert.is(await sh(b, h, 'echo ok'), 'ok\n')
}))

ctest('nothing is left: no sandbox groups, run directories or staging copies', () => {
  checkNothingLeft()
})

test.run()
