import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createCgroupProvider, isAlive } from '../../../src/backends/container/index.js'
import type { LaunchedVm } from '../../../src/backends/microvm/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { assertGone, CGROUP_PARENT, GUEST_DIR, leftoverCgroups, newBackend, registerLeftoverCheck, runDir, sh, vmTest } from './helpers.js'

const here = dirname(fileURLToPath(import.meta.url))

vmTest('kill -9 of the node agent, then a new backend on the same data dir re-adopts the running VM, takes up its resumable command byte-exact, and reclaims the rest', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-adopt-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const dir = await runDir()
  const child = spawn(process.execPath, [join(here, 'adopt-child.js'), dataDir, dir, CGROUP_PARENT, GUEST_DIR], { stdio: ['ignore', 'pipe', 'pipe'] })
  defer(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  const vm = await new Promise<LaunchedVm>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('\n')) resolve(JSON.parse(out) as LaunchedVm) })
    child.stderr.on('data', (b: Buffer) => { out += b.toString() })
    child.once('exit', (code) => reject(new Error(`the first agent exited with ${code}: ${out}`)))
  })
  defer(async () => { if (await isAlive(vm.pid, vm.startTime)) process.kill(vm.pid, 'SIGKILL') })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
  assert.ok(await isAlive(vm.pid, vm.startTime), 'QEMU outlived the agent')

  // Leftovers a crash can leave: a record of a VM long dead, a directory nobody journaled, a group nobody uses.
  // The dead record is the adoptee's copied, its QEMU user too: reclaiming it must not end the adoptee.
  writeFileSync(join(dataDir, 'journal', 'ghost.json'), JSON.stringify({ vm: { ...vm, id: 'ghost', pid: 999_999_999, dir: join(dir, 'ghost') }, meta: {}, claimed: true, refs: [] }))
  mkdirSync(join(dir, 'stray'))
  await createCgroupProvider(CGROUP_PARENT).create('stray', { memoryMiB: 64 })

  const b = await newBackend(dataDir)
  defer(() => b.close())
  const adopted = await b.adopt!()
  const who = (a: { meta: unknown }): string => (a.meta as { who: string }).who
  // The second VM may be the pool's (made in the background after the first): its id is the pool's.
  assert.equal(adopted.map(who).sort(), ['paused', 'the first agent'])
  const first = adopted.find((a) => who(a) === 'the first agent')!
  const second = adopted.find((a) => who(a) === 'paused')!
  assert.is(first.handle.id, 'adoptee')
  assert.is(first.paused, undefined)
  assert.is(second.paused, true, 'the paused VM is adopted paused')
  const h = first.handle
  // The resumable command ran on in the guest: taken up from its first chunk (none was acknowledged), every line once.
  assert.equal(first.execs?.map((x) => [x.tag, x.fromSeq]), [['numbers', 0]])
  let taken = ''
  const r = await b.reattach!(h, 'numbers', { fromSeq: 0, onStdout: (c) => { taken += new TextDecoder().decode(c) } })
  assert.is(r.exitCode, 0)
  assert.is(taken, Array.from({ length: 400 }, (_, i) => `line ${i}\n`).join(''), 'the whole output, byte-exact')
  // The paused one still refuses commands, and resumes.
  const sleeper = second.handle
  const refused = await b.exec(sleeper, ['true']).catch((e: unknown) => e)
  assert.ok(isWarrenError(refused, ErrorCodes.SANDBOX_PAUSED), String(refused))
  assert.is(second.execs, undefined, 'a paused guest\'s agent is not asked')
  const later = await b.resume!(sleeper)
  assert.equal(later?.map((x) => [x.tag, x.fromSeq]), [['count', 0]], 'its resumable command, listed at its first resume')
  let counted = ''
  assert.is((await b.reattach!(sleeper, 'count', { fromSeq: 0, onStdout: (c) => { counted += new TextDecoder().decode(c) } })).exitCode, 0)
  assert.is(counted, Array.from({ length: 100 }, (_, i) => `n ${i}\n`).join(''))
  assert.is(await sh(b, sleeper, 'hostname'), 'sleeper\n')
  const sleeperVm = b.vm(sleeper)!
  await b.kill(sleeper)
  await assertGone(sleeperVm)
  assert.is(b.vm(h)!.pid, vm.pid, 'the same QEMU, not a new boot')
  assert.is((await sh(b, h, 'cat /root/note')), 'written before the crash')
  assert.match(await sh(b, h, 'ps'), /sleep 1000/, 'its processes ran on')
  assert.equal(readdirSync(join(dataDir, 'journal')), ['adoptee.json'], 'the ghost record and any pooled VM\'s are gone')
  assert.equal(readdirSync(dir), ['adoptee'], 'the stray directory is gone')
  assert.equal(leftoverCgroups('stray'), [], 'the stray group is gone')

  await b.kill(h)
  await assertGone(vm)
  assert.not.ok(existsSync(join(dataDir, 'journal', 'adoptee.json')))
}))

registerLeftoverCheck()
test.run()
