/**
 * Memory snapshots of a VM: a counter started in the background and a file written before the
 * snapshot; two VMs restored from the saved state each have the counter running (the same pid,
 * still counting) and the file, under a name and randomness of their own, and diverge after;
 * the source runs on; the forks share the snapshot's pages, and the command the source was streaming
 * ends in them. Refusals: a shape or a machine (accelerator, CPU model, QEMU) that differs from the saved one, a malformed state
 * digest, a guest past the snapshot bound, a container asked for memory. A save past its time is
 * called off.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createContainerBackend } from '../../../src/backends/container/index.js'
import { MicrovmDefaults } from '../../../src/backends/microvm/index.js'
import { saveMemorySnapshot } from '../../../src/backends/microvm/memory-snapshot.js'
import { connectQmp } from '../../../src/backends/microvm/qmp.js'
import { saveVmState, setVcpus } from '../../../src/backends/microvm/vm-state.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, newBackend, savedRamMapping, registerLeftoverCheck, sh, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 192, diskMiB: 32, pids: 64 }

/** A counter in the background writing /tmp/count every 0.1 s (renamed into place: never read half written); prints its pid. */
const COUNTER = '(i=0; while true; do i=$((i+1)); echo $i > /tmp/count.t; mv /tmp/count.t /tmp/count; sleep 0.1; done) >/dev/null 2>&1 </dev/null & echo $!'

/** Waits (inside the guest, bounded by the exec's timeout) until the counter moves, then prints it. */
const COUNTS = 'a=$(cat /tmp/count); while [ "$(cat /tmp/count)" = "$a" ]; do sleep 0.05; done; cat /tmp/count'

const fieldOf = (err: unknown): unknown => (err as WarrenError).details?.field

/** The installed QEMU's major.minor, as its -version says. */
const qemuRelease = (): string => /version (\d+\.\d+)/.exec(execFileSync(MicrovmDefaults.qemuPath, ['-version'], { encoding: 'utf8' }))![1]!

vmTest('a memory snapshot restores in two VMs with the process still counting (same pid), the files, fresh identity; they diverge; the source runs on', timed(240_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-vmmem-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  // Templates on: the source is restored from its shape's template (its RAM a private file mapping).
  const b = await newBackend(dataDir, { templates: true, onProgress: (l) => console.log(l) })
  defer(() => b.close())
  const src = await b.create({ id: 'mem-src', limits: LIMITS })
  const pid = (await sh(b, src, COUNTER)).trim()
  assert.match(pid, /^\d+$/)
  await sh(b, src, 'echo before > /root/f && ' + COUNTS)
  // A command streaming when the snapshot is cut: resumable, so the guest's agent keeps it across hang-ups.
  let ticks = ''
  const ticker = b.exec(src, ['sh', '-c', 'while true; do echo tick; sleep 0.2; done'], { resume: { tag: 'ticker', onAck: () => {} }, onStdout: (c) => { ticks += new TextDecoder().decode(c) } })
  while (!ticks.includes('tick')) await new Promise((resolve) => setTimeout(resolve, 20))

  const started = performance.now()
  const snap = await b.snapshot!(src, { memory: true })
  console.log(`microvm memory snapshot of a ${LIMITS.memoryMiB} MiB guest (${b.status().accel}): ${(performance.now() - started).toFixed(0)} ms, ${snap.bytes} bytes`)
  assert.match(snap.digest, /^sha256:[0-9a-f]{64}$/)
  assert.equal([snap.memory?.vcpus, snap.memory?.memoryMiB], [1, LIMITS.memoryMiB])
  // The machine saved: accelerator, CPU model (max under TCG, host's under KVM), QEMU release.
  const cpu = b.status().accel === 'tcg' ? 'max' : 'host[^:]*'
  assert.match(snap.memory?.machine ?? '', new RegExp(`^${b.status().accel}:${cpu}:qemu-${qemuRelease().replace('.', '\\.')}$`))
  assert.ok(snap.bytes < (LIMITS.memoryMiB + 64) * 1024 * 1024, 'bounded by the guest\'s memory')
  // The source goes on: counting, answering.
  assert.match(await sh(b, src, `kill -0 ${pid} && ${COUNTS}`), /^\d+\n$/)

  const memory = { state: snap.digest, ...snap.memory! }
  const forks = []
  for (const id of ['mem-a', 'mem-b']) {
    const t0 = performance.now()
    forks.push(await b.create({ id, limits: LIMITS, memory }))
    console.log(`microvm create from a memory snapshot: ${(performance.now() - t0).toFixed(0)} ms`)
  }
  const seeds = new Set<string>()
  for (const [i, f] of forks.entries()) {
    const name = i === 0 ? 'mem-a' : 'mem-b'
    assert.is(await sh(b, f, 'hostname'), `${name}\n`)
    assert.is(await sh(b, f, 'cat /root/f'), 'before\n', 'the file written before the snapshot')
    // The same process, still counting.
    assert.is(await sh(b, f, `kill -0 ${pid} && echo alive`), 'alive\n')
    const first = Number(await sh(b, f, COUNTS))
    const later = Number(await sh(b, f, COUNTS))
    assert.ok(later > first, `counting on in ${name}: ${first} then ${later}`)
    seeds.add(await sh(b, f, 'head -c 16 /dev/urandom | od -An -tx1'))
    await sh(b, f, `echo ${name} > /root/mine`)
  }
  assert.is(seeds.size, 2, 'each restored VM draws its own random numbers')
  assert.equal([b.status().templates, b.status().memoryTemplates], [1, 1], 'the shape\'s template (the source came from it), and the snapshot\'s RAM made shareable once, in a store of its own')
  // The forks share the snapshot's pages: each maps the one saved RAM private, the pages both read are resident once.
  for (const f of forks) {
    const ram = savedRamMapping(b.vm(f)!.pid)
    console.log(`microvm fork of a memory snapshot: saved RAM resident ${(ram.rssKiB / 1024).toFixed(1)} MiB, shared ${(ram.sharedKiB / 1024).toFixed(1)} MiB`)
    assert.ok(ram.sharedKiB > 16 * 1024, `pages of the snapshot shared between the forks: ${ram.sharedKiB} KiB`)
  }
  // The command the source was streaming belongs to the source: ended in each fork, running on in the source.
  for (const f of forks) assert.not.match(await sh(b, f, 'ps'), /echo tick/)
  assert.match(await sh(b, src, 'ps'), /echo tick/)
  // Diverged: each has only its own write; the source neither.
  assert.is(await sh(b, forks[0]!, 'cat /root/mine'), 'mem-a\n')
  assert.is(await sh(b, forks[1]!, 'cat /root/mine'), 'mem-b\n')
  assert.is(await sh(b, src, 'ls /root'), 'f\n')

  // The machine must be the one saved.
  await b.create({ id: 'mem-bad', limits: { ...LIMITS, memoryMiB: 256 }, memory }).then(() => assert.unreachable('another memory size restores'), (err: unknown) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'), String(err))
    assert.is(fieldOf(err), 'limits.memoryMiB')
  })
  // Saved under another accelerator (or CPU model, or QEMU release): refused before QEMU is asked.
  const other = b.status().accel === 'tcg' ? 'kvm:host:qemu-7.2' : 'tcg:max:qemu-7.2'
  await b.create({ id: 'mem-bad', limits: LIMITS, memory: { ...memory, machine: other } }).then(() => assert.unreachable('another machine\'s state restores'), (err: unknown) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_UNSUPPORTED'), String(err))
    assert.is(fieldOf(err), 'memory')
  })
  await b.create({ id: 'mem-bad', limits: LIMITS, memory: { ...memory, state: 'sha256:nothex' } }).then(() => assert.unreachable('a malformed digest restores'), (err: unknown) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_BAD_SPEC'), String(err))
    assert.is(fieldOf(err), 'memory')
  })

  for (const h of [src, ...forks]) {
    const vm = b.vm(h)!
    await b.kill(h)
    await assertGone(vm)
  }
  assert.is((await ticker).exitCode, 137, 'the source\'s command ended with its VM')
}))

vmTest('a save past its time is called off: TIMEOUT, the migration cancelled, the VM runs on once its vCPUs do', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-vmlate-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir)
  defer(() => b.close())
  const h = await b.create({ id: 'mem-late', limits: { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 32 } })
  const vm = b.vm(h)!
  // 1 ms cannot hold the guest's 128 MiB going out (a socket and a file away, at most 8 GiB/s).
  const late = await saveVmState(vm, join(dataDir, 'late.state'), { ram: 'in-stream', timeoutMs: 1, maxBytes: 256 * 1024 * 1024 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(late, ErrorCodes.TIMEOUT), String(late))
  // QMP serves one client at a time: this one is gone before setVcpus connects.
  const qmp = await connectQmp(vm.qmpSocket)
  try {
    await waitFor(async () => ((await qmp.execute('query-migrate')) as { status?: string }).status === 'cancelled', 20_000, 'the migration to be cancelled')
  } finally {
    qmp.close()
  }
  await setVcpus(vm.qmpSocket, true)
  assert.is(await sh(b, h, 'echo ok'), 'ok\n')
  await b.kill(h)
  await assertGone(vm)
}))

test('a guest past the snapshot bound is refused before anything is saved (QUOTA naming memory)', async () => {
  const never = async (): Promise<never> => { throw new Error('nothing is saved') }
  await saveMemorySnapshot({ id: 'x', qmpSocket: '/nonexistent', dir: '/nonexistent', vcpus: 1, memoryMiB: 512, machine: 'tcg:max:qemu-7.2' }, tmpdir(), { whileStopped: never, maxBytes: 256 * 1024 * 1024 }).then(() => assert.unreachable(), (err: unknown) => {
    assert.ok(isWarrenError(err, 'WARREN_ERR_QUOTA'), String(err))
    assert.is(fieldOf(err), 'memory')
  })
})

test('a container cannot start from a memory snapshot (UNSUPPORTED naming memory)', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-vmmem-c-'))
  const c = createContainerBackend({ dataDir, runDir: join(dataDir, 'run'), pool: { max: 0 } })
  try {
    await c.create({ memory: { state: `sha256:${'0'.repeat(64)}`, vcpus: 1, memoryMiB: 128 } }).then(() => assert.unreachable(), (err: unknown) => {
      assert.ok(isWarrenError(err, 'WARREN_ERR_UNSUPPORTED'), String(err))
      assert.is(fieldOf(err), 'memory')
    })
  } finally {
    await c.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
})

registerLeftoverCheck()
test.run()
