/**
 * A VM's QEMU, once set up, is jailed (qemu-jail.ts): a host user of its own that no other VM
 * has, no capabilities, its seccomp filter, chrooted into an empty directory, in a network and an
 * IPC namespace of its own. Checked on a
 * template's VMs (restored, so the save and the load go through the jail's socket and the
 * handed-over descriptor) and from the outside: a process as one VM's user cannot signal
 * another VM's QEMU, and can signal its own.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { MicrovmDefaults, type LaunchedVm } from '../../../src/backends/microvm/index.js'
import { endQemuUser, mayEndQemuUser, releaseQemuUser, takeQemuUser } from '../../../src/backends/microvm/qemu-jail.js'
import { connectQmp } from '../../../src/backends/microvm/qmp.js'
import { isAlive } from '../../../src/backends/container/proc.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, sh, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 128, diskMiB: 16, pids: 32 }

/** A /proc/PID/status line's fields after its name. */
function status (pid: number, name: string): string[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${name}:`))
  return (line ?? '').slice(name.length + 1).trim().split(/\s+/)
}

/** `kill -0 target` run as `uid` (its group the same, no other groups): its exit code and what it said. */
function signalAs (uid: number, target: number): { code: number | null, stderr: string } {
  const r = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'kill', '-0', String(target)], { encoding: 'utf8', timeout: 10_000 })
  return { code: r.status, stderr: r.stderr }
}

/**
 * Connects to 127.0.0.1:`port` from the network namespace of `pid` (the host's when undefined),
 * with bash's /dev/tcp: its exit code and what it said.
 */
function connectFrom (pid: number | undefined, port: number): { code: number | null, stderr: string } {
  const probe = ['bash', '-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`]
  const [cmd, args] = pid === undefined ? [probe[0]!, probe.slice(1)] : ['nsenter', [`--net=/proc/${pid}/ns/net`, '--', ...probe]]
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 })
  return { code: r.status, stderr: r.stderr }
}

vmTest('each VM\'s QEMU runs as a host user of its own, without capabilities, seccomp on, in an empty root and a network and IPC namespace of its own; one VM\'s user cannot signal another\'s QEMU, nor reach a host port', timed(120_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-jail-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir, { templates: true })
  defer(() => b.close())
  const handles = [await b.create({ id: 'jail-a', limits: LIMITS }), await b.create({ id: 'jail-b', limits: LIMITS })]
  assert.is(b.status().templates, 1, 'restored from a template: saved and loaded through the jail')
  const vms = handles.map((h) => b.vm(h)!) as [LaunchedVm, LaunchedVm]
  const { first, count } = MicrovmDefaults.qemuUsers
  for (const vm of vms) {
    const uid = vm.uid!
    assert.ok(uid >= first && uid < first + count, `uid ${uid} in the QEMU users' range`)
    assert.equal(status(vm.pid, 'Uid'), [String(uid), String(uid), String(uid), String(uid)], 'real, effective, saved and file-system user')
    assert.equal(status(vm.pid, 'Gid'), [String(uid), String(uid), String(uid), String(uid)])
    assert.equal(status(vm.pid, 'Groups'), [String(uid)])
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
      // The bounding set stays (only a process with CAP_SETPCAP drops it); nothing is in the others.
      if (set !== 'CapBnd') assert.is(status(vm.pid, set)[0], '0000000000000000', `${set} empty`)
    }
    assert.is(status(vm.pid, 'Seccomp')[0], '2', 'QEMU\'s seccomp filter')
    assert.is(status(vm.pid, 'NoNewPrivs')[0], '1')
    const root = readlinkSync(`/proc/${vm.pid}/root`)
    assert.is(root, join(vm.dir, 'root'))
    assert.equal(readdirSync(root), [], 'nothing in its root')
    const st = statSync(root)
    assert.is(st.uid, 0, 'its root is root\'s, not its own to write in')
    assert.is(st.mode & 0o777, 0o711)
    for (const ns of ['net', 'ipc']) {
      assert.is.not(readlinkSync(`/proc/${vm.pid}/ns/${ns}`), readlinkSync(`/proc/self/ns/${ns}`), `a ${ns} namespace of its own`)
    }
    assert.is(readlinkSync(`/proc/${vm.pid}/ns/mnt`), readlinkSync(`/proc/self/ns/mnt`), 'the host\'s mounts, seen through its chroot')
  }
  // From QEMU's network namespace, a port listening on the host's loopback is not there.
  const server = createServer((s) => s.end('reached\n'))
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const fromHost = connectFrom(undefined, port)
  assert.is(fromHost.code, 0, `the port answers from the host's namespace: ${fromHost.stderr}`)
  const fromJail = connectFrom(vms[0].pid, port)
  assert.is.not(fromJail.code, 0, 'and not from QEMU\'s')
  assert.match(fromJail.stderr, /unreachable|refused/i)
  assert.is.not(vms[0].uid, vms[1].uid, 'no two VMs share a user')
  const own = signalAs(vms[0].uid!, vms[0].pid)
  assert.is(own.code, 0, `a process as VM a's user can signal its own QEMU: ${own.stderr}`)
  const other = signalAs(vms[0].uid!, vms[1].pid)
  assert.is.not(other.code, 0, 'and not VM b\'s')
  assert.match(other.stderr, /not permitted/i)
  // The jailed QEMUs still serve their guests.
  for (const h of handles) assert.is(await sh(b, h, 'echo ok'), 'ok\n')
  for (const [i, h] of handles.entries()) {
    await b.kill(h)
    await assertGone(vms[i]!)
  }
}))

vmTest('a QEMU that starts a process once it is up (here: a migration to exec:) is killed by its own seccomp filter, spawn=deny', timed(90_000, async (defer) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-jail-spawn-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir)
  defer(() => b.close())
  const h = await b.create({ id: 'jail-spawn', limits: LIMITS })
  defer(() => b.kill(h))
  const vm = b.vm(h)!
  assert.is(await sh(b, h, 'echo up'), 'up\n')
  // Without the filter QEMU forks, its child finds no shell in the empty root, and QEMU lives on.
  const qmp = await connectQmp(vm.qmpSocket)
  await qmp.execute('migrate', { uri: 'exec:cat >/dev/null' }).catch(() => {})
  qmp.close()
  await waitFor(async () => !await isAlive(vm.pid, vm.startTime), 20_000, 'QEMU killed')
}))

test('a user is given again only once nothing runs as it: what a QEMU left running as its user ends with it', timed(20_000, async (defer) => {
  if (process.getuid?.() !== 0) return
  const uid = MicrovmDefaults.qemuUsers.first + MicrovmDefaults.qemuUsers.count - 1
  const left = spawn('sleep', ['600'], { uid, gid: uid, stdio: 'ignore' })
  defer(() => { left.kill('SIGKILL') })
  const ended = new Promise<string | null>((resolve) => left.once('exit', (_code, signal) => resolve(signal)))
  await endQemuUser(uid)
  assert.is(await ended, 'SIGKILL')
}))

test('a user leased to a VM of another node agent on the host is not given again: leases are files every agent sees', timed(20_000, async (defer) => {
  if (process.getuid?.() !== 0) return
  // A range of two users, in this process and in the other agent's, so that the two must meet.
  const range = { first: MicrovmDefaults.qemuUsers.first + MicrovmDefaults.qemuUsers.count - 8, count: 2 }
  const saved = MicrovmDefaults.qemuUsers
  const defaults = MicrovmDefaults as { qemuUsers: { first: number, count: number } }
  defaults.qemuUsers = range
  defer(() => { defaults.qemuUsers = saved })
  const dir = mkdtempSync(join(tmpdir(), 'warren-lease-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const [a, b, c] = ['a', 'b', 'c'].map((n) => { const d = join(dir, n); mkdirSync(d); return d }) as [string, string, string]
  // The other node agent: a process of its own that takes a user for its VM b and ends.
  const jail = new URL('../../../src/backends/microvm/qemu-jail.js', import.meta.url).href
  const defaultsUrl = new URL('../../../src/backends/microvm/defaults.js', import.meta.url).href
  const other = spawnSync(process.execPath, ['--input-type=module', '-e', `
    const { MicrovmDefaults } = await import(${JSON.stringify(defaultsUrl)})
    const { takeQemuUser } = await import(${JSON.stringify(jail)})
    MicrovmDefaults.qemuUsers = ${JSON.stringify(range)}
    process.stdout.write(String(takeQemuUser(${JSON.stringify(b)})))`], { encoding: 'utf8', timeout: 10_000 })
  assert.is(other.status, 0, other.stderr)
  const theirs = Number(other.stdout)
  defer(() => releaseQemuUser(theirs, b))
  assert.ok(theirs === range.first || theirs === range.first + 1, other.stdout)
  const ours = takeQemuUser(a)
  defer(() => releaseQemuUser(ours, a))
  assert.is(ours, theirs === range.first ? range.first + 1 : range.first, 'the user the other agent leased is not given here')
  const none = (() => { try { return takeQemuUser(c) } catch (err) { return err } })()
  assert.ok(isWarrenError(none, ErrorCodes.NO_CAPACITY), String(none))
  assert.ok(!mayEndQemuUser(theirs, a), 'ending VM a does not end what runs as b\'s user')
  assert.ok(mayEndQemuUser(theirs, b))
  releaseQemuUser(theirs, a)
  assert.ok(!mayEndQemuUser(theirs, c), 'only its holder gives a user back')
  releaseQemuUser(theirs, b)
  const again = takeQemuUser(c)
  defer(() => releaseQemuUser(again, c))
  assert.is(again, theirs, 'given again once given back')
}))

registerLeftoverCheck()
test.run()
