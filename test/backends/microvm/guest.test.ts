import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ContainerDefaults } from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { chooseAccel, kernelCmdline, MicrovmDefaults, qemuArgs, type VmPlan } from '../../../src/backends/microvm/index.js'
import { buildInitramfs, bzImageRelease, loadOrder, operatorKernel, parseModuleIndex, prepareGuest, writeCpio } from '../../../src/backends/microvm/guest/index.js'
import { timed } from '../../support/index.js'
import { GUEST_DIR, vmTest } from './helpers.js'

/** Reads a newc archive back: name, mode, rdev and data of each entry. */
function readCpio (buf: Buffer): Array<{ name: string, mode: number, rdev: [number, number], data: Buffer }> {
  const out: Array<{ name: string, mode: number, rdev: [number, number], data: Buffer }> = []
  let at = 0
  const align = (n: number): number => (n + 3) & ~3
  for (;;) {
    const h = buf.toString('ascii', at, at + 110)
    assert.is(h.slice(0, 6), '070701', `magic at ${at}`)
    const field = (i: number): number => Number.parseInt(h.slice(6 + i * 8, 14 + i * 8), 16)
    const namesize = field(11)
    const name = buf.toString('utf8', at + 110, at + 110 + namesize - 1)
    const dataAt = align(at + 110 + namesize)
    const size = field(6)
    if (name === 'TRAILER!!!') return out
    out.push({ name, mode: field(1), rdev: [field(9), field(10)], data: buf.subarray(dataAt, dataAt + size) })
    at = align(dataAt + size)
  }
}

test('cpio: newc entries padded to 4 bytes, device nodes with their numbers, a trailer, the same bytes each time', () => {
  const entries = [
    { type: 'dir' as const, path: 'dev' },
    { type: 'char' as const, path: 'dev/console', major: 5, minor: 1 },
    { type: 'file' as const, path: 'init', data: Buffer.from('#!/bin/sh\n'), mode: 0o755 },
    { type: 'file' as const, path: 'odd', data: Buffer.from('abc') }
  ]
  const a = writeCpio(entries)
  assert.is(a.length % 4, 0)
  assert.ok(a.equals(writeCpio(entries)), 'deterministic')
  const back = readCpio(a)
  assert.equal(back.map((e) => e.name), ['dev', 'dev/console', 'init', 'odd'])
  assert.is(back[0]!.mode, 0o040755)
  assert.is(back[1]!.mode, 0o020600)
  assert.equal(back[1]!.rdev, [5, 1])
  assert.is(back[2]!.mode, 0o100755)
  assert.is(back[3]!.data.toString(), 'abc')
  assert.throws(() => writeCpio([{ type: 'dir', path: '/abs' }]))
})

const DEP = [
  'kernel/drivers/virtio/virtio_ring.ko:',
  'kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko',
  'kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko',
  'kernel/fs/erofs/erofs.ko: kernel/lib/libcrc32c.ko',
  'kernel/lib/libcrc32c.ko:',
  'kernel/lib/crc-itu-t.ko:'
].join('\n')

test('modules: dependencies load first, each once; built-ins are skipped; a missing module is UNSUPPORTED naming it', () => {
  const index = parseModuleIndex(DEP, 'kernel/fs/overlayfs/overlay.ko\n')
  assert.equal(loadOrder(index, ['virtio_blk', 'erofs', 'overlay', 'virtio']).map((m) => m.name), ['virtio_ring', 'virtio', 'virtio_blk', 'libcrc32c', 'erofs'])
  assert.is(loadOrder(index, ['crc-itu-t'])[0]!.file, 'kernel/lib/crc-itu-t.ko', 'dashes are underscores')
  try {
    loadOrder(index, ['virtio_console'])
    assert.unreachable()
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.UNSUPPORTED), String(err))
    assert.is(isWarrenError(err) ? err.details?.module : undefined, 'virtio_console')
  }
})

const plan: VmPlan = {
  id: 'v1', hostname: 'h1', layers: ['/l/base.erofs', '/l/tools.erofs'], kernel: '/k/vmlinuz', initrd: '/k/initrd', modulesDisk: '/k/mods.erofs',
  vcpus: 2, memoryMiB: 256, diskMiB: 64, pids: 100, accel: 'tcg', tscKhz: 2000000,
  agentSocket: '/r/v1/agent.sock', egressSocket: '/r/v1/egress.sock', qmpSocket: '/r/v1/qmp.sock', consoleSocket: '/r/v1/con.sock', pidFile: '/r/v1/qemu.pid'
}

test('qemu args: microvm without defaults or NIC, layers read-only by serial in stack order, the agent port, QMP, its seccomp filter with spawn denied (so not daemonized)', () => {
  const args = qemuArgs(plan)
  const after = (flag: string): string[] => args.flatMap((a, i) => a === flag ? [args[i + 1]!] : [])
  assert.ok(after('-M')[0]!.startsWith('microvm'))
  for (const f of ['-nodefaults', '-no-user-config', '-no-reboot']) assert.ok(args.includes(f), f)
  assert.not.ok(args.includes('-daemonize'), 'a fork after the filter is what spawn=deny forbids')
  assert.match(args[args.indexOf('-sandbox') + 1]!, /^on,.*spawn=deny/)
  assert.equal(after('-nic'), ['none'])
  assert.equal(after('-smp'), ['2'])
  assert.equal(after('-m'), ['256M'])
  assert.match(after('-accel')[0]!, /^tcg,tb-size=\d+$/)
  const drives = after('-drive')
  assert.is(drives.length, 3)
  for (const d of drives) assert.match(d, /readonly=on/)
  assert.match(drives[0]!, /^file=\/l\/base\.erofs,/)
  assert.equal(after('-device').filter((d) => d.startsWith('virtio-blk-device')).map((d) => /serial=([^,]+)/.exec(d)![1]), ['warren-l0', 'warren-l1', 'warren-mods'])
  assert.ok(after('-device').some((d) => d.includes('name=warren.agent')))
  assert.ok(after('-device').some((d) => d.includes('name=warren.egress')), 'every VM has the egress port')
  assert.ok(after('-chardev').some((c) => c.includes('path=/r/v1/egress.sock')))
  assert.not.ok(args.includes('-incoming'))
  assert.match(after('-M')[0]!, /memory-backend=mem/)
  assert.equal(after('-object'), ['memory-backend-ram,id=mem,size=256M,merge=on'], 'anonymous RAM by default, named as every VM\'s is')
  assert.ok(after('-chardev').some((c) => c.includes('path=/r/v1/agent.sock') && c.includes('server=on')))
  assert.ok(after('-mon').includes('chardev=qmp,mode=control'))
  assert.ok(!args.some((a) => /netdev|virtio-net/.test(a)), 'no network device')
  // A comma in a path is doubled, so it cannot start another option.
  const odd = qemuArgs({ ...plan, layers: ['/l/a,format=qcow2.erofs'] })
  assert.ok(odd.includes('file=/l/a,,format=qcow2.erofs,format=raw,readonly=on,if=none,id=l0'))
})

test('qemu args: a template\'s RAM is a shared file, a restored VM maps it private and waits for its state', () => {
  const template = qemuArgs({ ...plan, memoryFile: { path: '/t/ram', share: true } })
  const after = (args: string[], flag: string): string[] => args.flatMap((a, i) => a === flag ? [args[i + 1]!] : [])
  assert.match(after(template, '-M')[0]!, /memory-backend=mem/)
  assert.equal(after(template, '-object'), ['memory-backend-file,id=mem,size=256M,mem-path=/t/ram,share=on,merge=on'])
  const restored = qemuArgs({ ...plan, memoryFile: { path: '/t/ram', share: false }, incoming: true })
  assert.equal(after(restored, '-object'), ['memory-backend-file,id=mem,size=256M,mem-path=/t/ram,share=off,merge=on'])
  assert.equal(after(restored, '-incoming'), ['defer'])
})

test('qemu args: the CPU model is max under TCG, host under KVM, or the one the probe found to work', () => {
  const cpuOf = (p: VmPlan): string | undefined => { const a = qemuArgs(p); return a[a.indexOf('-cpu') + 1] }
  assert.is(cpuOf(plan), 'max')
  assert.is(cpuOf({ ...plan, accel: 'kvm' }), 'host')
  assert.is(cpuOf({ ...plan, accel: 'kvm', cpu: 'host,-arch-capabilities' }), 'host,-arch-capabilities')
  assert.equal(qemuArgs({ ...plan, accel: 'kvm' }).filter((a, i, all) => all[i - 1] === '-accel'), ['kvm'])
})

test('the accelerator this host is given boots: KVM only where /dev/kvm opens, and never PVM\'s for a stock kernel', () => {
  const choice = chooseAccel()
  if (!existsSync('/dev/kvm')) assert.equal([choice.accel, choice.kvmRefused], ['tcg', undefined])
  // The module may be loaded with /dev/kvm gone (seen here): then there is nothing to refuse.
  else if (existsSync('/sys/module/kvm_pvm') && !existsSync('/sys/module/kvm_intel') && !existsSync('/sys/module/kvm_amd')) {
    assert.is(choice.accel, 'tcg')
    assert.match(choice.kvmRefused ?? '', /PVM/)
  }
  if (choice.accel === 'tcg') assert.is(choice.cpu, 'max')
  assert.ok(chooseAccel() === choice, 'probed once')
})

test('kernel command line: the agent\'s parameters; the TSC rate only under TCG', () => {
  const tcg = kernelCmdline(plan)
  for (const p of ['warren.id=h1', 'warren.layers=2', 'warren.disk=64', 'warren.pids=100', 'warren.mods=1', 'tsc_early_khz=2000000', 'panic=-1']) assert.ok(tcg.split(' ').includes(p), p)
  const kvm = kernelCmdline({ ...plan, accel: 'kvm', modulesDisk: undefined })
  assert.not.ok(kvm.includes('tsc_early_khz'))
  assert.not.ok(kvm.includes('warren.mods'))
})

test('an operator kernel must be a bzImage; its module tree needs modules.dep', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-kernel-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'not-a-kernel'), 'hello')
  const refusal = await operatorKernel(join(dir, 'not-a-kernel')).catch((e: unknown) => e)
  assert.ok(isWarrenError(refusal, ErrorCodes.INVALID_ARGUMENT), String(refusal))
  assert.is(isWarrenError(refusal) ? refusal.details?.field : undefined, 'kernel')
  const missing = await operatorKernel(join(dir, 'nothing')).catch((e: unknown) => e)
  assert.ok(isWarrenError(missing, ErrorCodes.INVALID_ARGUMENT))
}))

vmTest('the Debian guest: kernel, initramfs with the agent as /init and the boot modules in order, module disk; made once', timed(180_000, async (defer) => {
  const lines: string[] = []
  const guest = await prepareGuest({ dir: GUEST_DIR, onProgress: (l) => lines.push(l) })
  assert.is(await bzImageRelease(guest.kernel), guest.release)
  assert.ok(guest.modulesDisk !== undefined)
  const entries = readCpio(readFileSync(guest.initrd))
  const init = entries.find((e) => e.name === 'init')!
  assert.is(init.mode, 0o100755)
  assert.is(init.data.subarray(0, 4).toString('latin1'), '\x7fELF')
  assert.ok(entries.some((e) => e.name === 'dev/console' && e.rdev[0] === 5 && e.rdev[1] === 1))
  const order = entries.find((e) => e.name === 'modules/order')!.data.toString().trim().split('\n')
  for (const m of ['virtio_mmio', 'virtio_blk', 'virtio_console', 'erofs', 'overlay']) assert.ok(order.includes(m), m)
  assert.ok(order.indexOf('virtio_ring') < order.indexOf('virtio_blk'), 'dependencies first')
  for (const m of order) assert.ok(entries.some((e) => e.name === `modules/${m}.ko`), m)
  // A second time costs nothing and gives the same files.
  const started = performance.now()
  const again = await prepareGuest({ dir: GUEST_DIR, onProgress: (l) => lines.push(`again: ${l}`) })
  assert.equal(again, guest)
  assert.ok(performance.now() - started < 5000, 'reused')
  assert.not.ok(lines.some((l) => l.startsWith('again:')), 'no slow step the second time')
  // The operator's copy of the same kernel, named with its module tree, gives the same initramfs.
  const tree = join(GUEST_DIR, 'kernel', guest.release, 'lib', 'modules', guest.release)
  const out = mkdtempSync(join(tmpdir(), 'warren-initrd-'))
  defer(() => rmSync(out, { recursive: true, force: true }))
  const own = await buildInitramfs(await operatorKernel(guest.kernel, tree), ContainerDefaults.agentPath, out)
  assert.ok(readFileSync(own).equals(readFileSync(guest.initrd)))
  // Another build's initramfs in the same dir may be another node's: kept while recent, removed
  // once no node has prepared it for MicrovmDefaults.initramfsKeepMs.
  const recent = join(out, 'initramfs-0123456789abcdef.cpio')
  const stale = join(out, 'initramfs-fedcba9876543210.cpio')
  writeFileSync(recent, 'another node\'s')
  writeFileSync(stale, 'nobody\'s')
  const longAgo = new Date(Date.now() - MicrovmDefaults.initramfsKeepMs - 60_000)
  utimesSync(stale, longAgo, longAgo)
  utimesSync(own, longAgo, longAgo)
  assert.is(await buildInitramfs(await operatorKernel(guest.kernel, tree), ContainerDefaults.agentPath, out), own)
  assert.ok(existsSync(recent), 'a recent one stays')
  assert.not.ok(existsSync(stale), 'a stale one goes')
  assert.ok(statSync(own).mtimeMs > longAgo.getTime(), 'its own is marked prepared now')
}))

test.run()
