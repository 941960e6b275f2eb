/**
 * One VM, booted once and shared by the tests that do not end it (they only run commands and
 * touch files in it); a memory hog runs last among them, since the guest kills it and lives on.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { release, tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits } from '../../../src/backends/container/index.js'
import type { MicrovmBackend } from '../../../src/backends/microvm/index.js'
import type { SandboxHandle } from '../../../src/backends/types.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { sleep, timed, waitFor } from '../../support/index.js'
import { assertGone, bytes, newBackend, p50, registerLeftoverCheck, run, sh, text, vmTest } from './helpers.js'

const dataDir = mkdtempSync(join(tmpdir(), 'warren-vm-'))
let backend: MicrovmBackend | undefined
let shared: { b: MicrovmBackend, h: SandboxHandle, createMs: number } | undefined

/** The shared VM: 256 MiB, a 32 MiB writable layer, 64 processes. */
async function vm (): Promise<{ b: MicrovmBackend, h: SandboxHandle, createMs: number }> {
  if (shared !== undefined) return shared
  backend ??= await newBackend(dataDir)
  const started = performance.now()
  const h = await backend.create({ id: 'vmtest-shared', env: { GREETING: 'hi' }, limits: { cpus: 1, memoryMiB: 256, diskMiB: 32, pids: 64 } })
  shared = { b: backend, h, createMs: performance.now() - started }
  return shared
}

test.after(async () => {
  await backend?.close()
  rmSync(dataDir, { recursive: true, force: true })
})

vmTest('boots the guest kernel, not the host\'s: uname -r, the hostname, one vCPU, the memory asked for', timed(90_000, async () => {
  const { b, h, createMs } = await vm()
  const guest = await b.guest()
  const [kernel, name, cpus, mem] = (await sh(b, h, 'uname -r; hostname; nproc; grep MemTotal /proc/meminfo')).trim().split('\n')
  assert.is(kernel, guest.release)
  assert.is.not(kernel, release(), 'not the host kernel')
  assert.is(name, 'vmtest-shared')
  assert.is(cpus, '1')
  const kib = Number(/(\d+)/.exec(mem!)![1])
  assert.ok(kib > 180 * 1024 && kib <= 256 * 1024, `MemTotal ${kib} kB`)
  console.log(`microvm cold boot to agent-ready (create, ${b.status().accel}): ${createMs.toFixed(0)} ms`)
}))

vmTest('exec: exit codes, stdout and stderr in order, the sandbox env, a missing program is NOT_FOUND, exec `true` p50', timed(60_000, async () => {
  const { b, h } = await vm()
  const r = await run(b, h, ['sh', '-c', 'echo one; echo two >&2; echo three; echo $GREETING; exit 7'])
  assert.is(r.exitCode, 7)
  assert.is(r.stdout, 'one\nthree\nhi\n')
  assert.is(r.stderr, 'two\n')
  assert.equal(r.events.map(([k]) => k).slice(0, 2), ['out', 'err'])
  assert.is((await run(b, h, ['false'])).exitCode, 1)
  const missing = await b.exec(h, ['/no/such/program']).catch((e: unknown) => e)
  assert.ok(isWarrenError(missing, ErrorCodes.NOT_FOUND), String(missing))
  const killedBySignal = await run(b, h, ['sh', '-c', 'kill -TERM $$'])
  assert.is(killedBySignal.exitCode, 128 + 15)
  const times: number[] = []
  for (let i = 0; i < 20; i++) {
    const t = performance.now()
    assert.is((await b.exec(h, ['true'])).exitCode, 0)
    times.push(performance.now() - t)
  }
  console.log(`microvm exec true p50 (${b.status().accel}): ${p50(times).toFixed(1)} ms`)
}))

vmTest('streamed stdin into a VM is sent only as fast as the command reads: a late reader loses none, the guest holds no more than the window', timed(90_000, async () => {
  const { b, h } = await vm()
  const total = 8 * 1024 * 1024
  const chunk = 256 * 1024
  let pulled = 0
  async function * input (): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < total; at += chunk) { pulled += chunk; yield Buffer.alloc(chunk, at / chunk) }
  }
  const late = run(b, h, ['sh', '-c', 'while [ ! -e /tmp/go-stdin ]; do sleep 0.05; done; wc -c'], { stdin: input() })
  await waitFor(() => pulled >= AgentLimits.stdinWindowBytes, 30_000, 'the window to be sent')
  await sleep(500)
  // No more than the window, the pipe's 64 KiB and the chunk in hand, however long it waits.
  assert.ok(pulled <= AgentLimits.stdinWindowBytes + 64 * 1024 + 2 * chunk, `${pulled} bytes pulled while nothing was read`)
  await b.files.write(h, '/tmp/go-stdin', bytes(''))
  const r = await late
  assert.is(r.stdout.trim(), String(total))
}))

vmTest('exec streams output while the command runs, takes stdin up front and streamed, honours credit, timeout and abort', timed(60_000, async () => {
  const { b, h } = await vm()
  // The first line arrives before the command ends: it waits for a file the test writes after seeing it.
  let sawFirst!: () => void
  const first = new Promise<void>((resolve) => { sawFirst = resolve })
  const streaming = b.exec(h, ['sh', '-c', 'echo ready; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done'], { onStdout: (c) => { if (text(c).includes('ready')) sawFirst() } })
  await first
  await b.files.write(h, '/tmp/go', bytes(''))
  assert.is((await streaming).exitCode, 0)
  assert.is((await run(b, h, ['cat'], { stdin: bytes('up front') })).stdout, 'up front')
  async function * chunks (): AsyncGenerator<Uint8Array> { for (const s of ['a', 'b', 'c']) yield bytes(s) }
  assert.is((await run(b, h, ['wc', '-c'], { stdin: chunks() })).stdout.trim(), '3')
  // Credit: a window of 4 KiB and grants as the output is taken; all 200 KB arrive.
  let grant!: (n: number) => void
  let got = 0
  const credited = await b.exec(h, ['sh', '-c', 'head -c 200000 /dev/zero'], {
    credit: { windowBytes: 4096, onGrant: (g) => { grant = g } },
    onStdout: (c) => { got += c.length; queueMicrotask(() => grant(c.length)) }
  })
  assert.is(credited.exitCode, 0)
  assert.is(got, 200000)
  const slow = await b.exec(h, ['sleep', '30'], { timeoutMs: 300 })
  assert.is(slow.reason, 'timeout')
  assert.is(slow.exitCode, 124)
  // A callback that throws cuts the command, and exec rejects with what it threw.
  const thrown = await b.exec(h, ['sh', '-c', 'echo x; sleep 30'], { onStdout: () => { throw new Error('consumer gave up') } }).catch((e: unknown) => e)
  assert.is((thrown as Error).message, 'consumer gave up')
  const abort = new AbortController()
  setTimeout(() => abort.abort(), 300)
  const aborted = await b.exec(h, ['sleep', '30'], { signal: abort.signal })
  assert.is(aborted.reason, 'killed')
}))

vmTest('exec runs where and as whom it is asked, and on a terminal of the asked size', timed(60_000, async () => {
  const { b, h } = await vm()
  assert.is((await sh(b, h, 'pwd', { cwd: '/tmp' })).trim(), '/tmp')
  assert.is((await sh(b, h, 'id -u; echo $HOME', { user: 'sandbox' })).trim(), '1000\n/home/sandbox')
  const pty = await run(b, h, ['sh', '-c', 'stty size; [ -t 0 ] && echo tty'], { pty: { cols: 100, rows: 30, onResize: () => {} } })
  assert.match(pty.stdout, /30 100/)
  assert.match(pty.stdout, /tty/)
}))

vmTest('files: written up and read down (a 3 MiB file in chunks, sha256 equal), listed, stat, renamed, linked, removed', timed(60_000, async () => {
  const { b, h } = await vm()
  const big = Buffer.alloc(3 * 1024 * 1024)
  for (let i = 0; i < big.length; i++) big[i] = (i * 131) & 0xff
  const chunk = 1024 * 1024
  for (let at = 0; at < big.length; at += chunk) await b.files.write(h, '/srv/data/big.bin', big.subarray(at, at + chunk), at === 0 ? {} : { offset: at })
  const parts: Buffer[] = []
  for (let at = 0; at < big.length; at += chunk) parts.push(Buffer.from(await b.files.read(h, '/srv/data/big.bin', { offset: at, length: chunk })))
  const sha = (x: Buffer): string => createHash('sha256').update(x).digest('hex')
  assert.is(sha(Buffer.concat(parts)), sha(big))
  assert.is((await sh(b, h, 'sha256sum /srv/data/big.bin')).split(' ')[0], sha(big), 'the guest sees the same bytes')
  const st = await b.files.stat(h, '/srv/data/big.bin')
  assert.is(st.type, 'file')
  assert.is(st.size, big.length)
  await b.files.mkdir(h, '/srv/a/b', { parents: true })
  await b.files.rename(h, '/srv/data/big.bin', '/srv/a/b/moved.bin')
  await b.files.symlink(h, '/srv/link', '/srv/a/b/moved.bin')
  assert.is((await b.files.stat(h, '/srv/link')).target, '/srv/a/b/moved.bin')
  assert.equal((await b.files.list(h, '/srv/a/b')).entries.map((e) => e.name), ['moved.bin'])
  await b.files.remove(h, '/srv', { recursive: true })
  const gone = await b.files.stat(h, '/srv').catch((e: unknown) => e)
  assert.ok(isWarrenError(gone, ErrorCodes.NOT_FOUND), String(gone))
  // Paths resolve inside the guest: its /etc/hostname-free busybox root has no host files.
  const shadow = await b.files.read(h, '/etc/shadow', { offset: 0, length: 100 }).catch((e: unknown) => e)
  assert.ok(isWarrenError(shadow, ErrorCodes.NOT_FOUND), String(shadow))
}))

vmTest('no network interface but loopback, which works', timed(60_000, async () => {
  const { b, h } = await vm()
  assert.equal((await sh(b, h, 'ls /sys/class/net')).trim().split(/\s+/), ['lo'])
  const out = await sh(b, h, '(nc -l -p 8080 -e echo pong &) ; sleep 0.3; echo ping | nc 127.0.0.1 8080')
  assert.match(out, /pong/)
}))

vmTest('a kernel module loads inside (modprobe from the guest kernel\'s own tree): what a container refuses', timed(60_000, async () => {
  const { b, h } = await vm()
  const guest = await b.guest()
  assert.ok((await sh(b, h, `ls /lib/modules/${guest.release}/modules.dep`)).includes('modules.dep'))
  assert.not.ok((await sh(b, h, 'cat /proc/modules')).includes('crc_itu_t'))
  await sh(b, h, 'modprobe crc-itu-t')
  assert.match(await sh(b, h, 'cat /proc/modules'), /^crc_itu_t /m)
  await sh(b, h, 'rmmod crc_itu_t')
}))

vmTest('diskMiB is enforced: writing past 32 MiB gives ENOSPC inside, the VM goes on', timed(60_000, async () => {
  const { b, h } = await vm()
  const r = await run(b, h, ['sh', '-c', 'dd if=/dev/zero of=/big bs=1M count=64 2>&1; df -m / | tail -1'])
  assert.match(r.stdout, /No space left on device/)
  await sh(b, h, 'rm /big')
  assert.is((await sh(b, h, 'echo still')).trim(), 'still')
}))

vmTest('limits.pids bounds the guest\'s processes: a burst of 80 background sleeps meets the limit of 64', timed(60_000, async () => {
  const { b, h } = await vm()
  // The burst runs in a subshell, which ash ends when a fork fails; the outer shell only runs builtins after it.
  const r = await run(b, h, ['sh', '-c', '(for i in $(seq 80); do sleep 2 & done) 2>&1; echo burst ended'])
  assert.match(r.stdout, /can't fork|Resource temporarily unavailable/i)
  assert.match(r.stdout, /burst ended/)
  assert.is(r.exitCode, 0)
  // Once the sleeps end the guest has room again (a read of the group's count needs no process).
  const current = async (): Promise<number> => Number(text(await b.files.read(h, '/sys/fs/cgroup/sandbox/pids.current', { offset: 0, length: 64 })))
  assert.ok(await current() > 32, 'the sleeps that did start hold their pids')
  await waitFor(async () => await current() <= 2, 20_000, 'the sleeps to end')
  assert.is((await sh(b, h, 'echo room')).trim(), 'room')
}))

vmTest('a memory hog ends with reason oom (the guest kernel kills it); the VM and the node live on', timed(90_000, async () => {
  const { b, h } = await vm()
  const r = await b.exec(h, ['sh', '-c', 'x=aaaaaaaa; while true; do x="$x$x"; done'], { timeoutMs: 60_000 })
  assert.is(r.reason, 'oom', JSON.stringify(r))
  assert.is(r.exitCode, 137)
  assert.is((await sh(b, h, 'echo alive')).trim(), 'alive')
  // A plain SIGKILL afterwards is not taken for another OOM.
  const k = await b.exec(h, ['sh', '-c', 'kill -9 $$'])
  assert.is(k.exitCode, 137)
  assert.is(k.reason, undefined)
}))

vmTest('kill ends QEMU and leaves nothing: process, sockets, directory, cgroup, journal record', timed(60_000, async () => {
  const { b, h } = await vm()
  const launched = b.vm(h)!
  const gone: string[] = []
  b.onGone!(h, (m) => gone.push(m))
  await b.kill(h)
  shared = undefined
  await assertGone(launched)
  assert.equal(readdirSync(join(dataDir, 'journal')), [])
  assert.equal(gone, [], 'a kill is not news to onGone')
  const after = await b.exec(h, ['true']).catch((e: unknown) => e)
  assert.ok(isWarrenError(after, ErrorCodes.SANDBOX_GONE))
  await b.kill(h) // idempotent
}))

vmTest('a create is refused what a VM cannot be given: too little memory, a fraction of a MiB of disk', timed(30_000, async () => {
  backend ??= await newBackend(dataDir)
  const small = await backend.create({ limits: { cpus: 1, memoryMiB: 64, diskMiB: 16, pids: 16 } }).catch((e: unknown) => e)
  assert.ok(isWarrenError(small, ErrorCodes.INVALID_ARGUMENT), String(small))
  assert.is(isWarrenError(small) ? small.details?.field : undefined, 'limits.memoryMiB')
  const disk = await backend.create({ limits: { cpus: 1, memoryMiB: 256, diskMiB: 0.5, pids: 16 } }).catch((e: unknown) => e)
  assert.ok(isWarrenError(disk, ErrorCodes.INVALID_ARGUMENT), String(disk))
  assert.is(isWarrenError(disk) ? disk.details?.field : undefined, 'limits.diskMiB')
}))

registerLeftoverCheck()
test.run()
