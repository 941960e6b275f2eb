/**
 * Container sandboxes, seen from inside: their own hostname, processes, network, read-only
 * layers, no mounting, the minimal /dev, reduced capabilities, no path to host files, and a
 * disk limit that ends in ENOSPC inside while the host is unaffected.
 */
import { createHash } from 'node:crypto'
import { readFileSync, statfsSync } from 'node:fs'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits } from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { busyboxLayer, bytes, registerLeftoverCheck, run, runDir, sandboxTest, sh, startSandbox, text } from './helpers.js'

sandboxTest('the hostname is the sandbox id', timed(10_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  assert.is((await sh(client, 'hostname')).trim(), sb.id)
  assert.is((await sh(client, 'cat /proc/sys/kernel/hostname')).trim(), sb.id)
}))

sandboxTest('PID 1 is the agent and host processes are invisible', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  assert.equal(await client.ping(), { version: AgentLimits.version, pid: 1 })
  assert.is((await sh(client, 'cat /proc/1/comm')).trim(), 'warren-init')
  // The agent's command line does not reveal host paths either.
  assert.is((await sh(client, "tr '\\0' ' ' < /proc/1/cmdline")).trim(), 'warren-init')
  const pids = (await sh(client, 'ls /proc')).split('\n').filter((n) => /^\d+$/.test(n)).map(Number)
  // The agent, the shell and ls: nothing else, and nothing with a host PID.
  assert.ok(pids.includes(1))
  assert.ok(pids.length <= 3, `processes visible: ${pids.join(' ')}`)
  assert.not.ok(pids.includes(process.pid))
  const ps = await sh(client, 'ps')
  assert.not.match(ps, /node/)
}))

sandboxTest('there is no network but loopback, and host ports are unreachable', timed(10_000, async (defer) => {
  const server = createServer((s) => s.end('host'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise((resolve) => server.close(resolve)))
  const port = (server.address() as AddressInfo).port
  const { client } = await startSandbox(defer)
  assert.is((await sh(client, 'ls /sys/class/net')).trim(), 'lo')
  const devs = (await sh(client, 'cat /proc/net/dev')).split('\n').slice(2).filter(Boolean).map((l) => l.split(':')[0]!.trim())
  assert.equal(devs, ['lo'])
  assert.match(await sh(client, 'cat /sys/class/net/lo/operstate; ip addr show lo'), /127\.0\.0\.1/)
  const r = await run(client, ['nc', '-w', '1', '127.0.0.1', String(port)])
  assert.is.not(r.result.exitCode, 0)
  assert.not.match(r.stdout, /host/)
}))

sandboxTest('layers are read-only: writes go to the upper layer and the image is unchanged', timed(15_000, async (defer) => {
  const layer = await busyboxLayer()
  const digest = (): string => createHash('sha256').update(readFileSync(layer)).digest('hex')
  const before = digest()
  const a = await startSandbox(defer)
  await sh(a.client, 'echo changed > /etc/passwd; echo new > /bin/newfile; rm /bin/ls')
  assert.is((await sh(a.client, 'cat /etc/passwd')).trim(), 'changed')
  assert.ok(await a.client.files.stat('/bin/newfile'))
  assert.is(digest(), before)
  // Another sandbox on the same layer sees the original files.
  const b = await startSandbox(defer)
  assert.match(await sh(b.client, 'cat /etc/passwd'), /^root:x:0:0/)
  assert.ok((await b.client.files.stat('/bin/ls')).type === 'symlink')
  // The overlay root itself is what the sandbox sees; no layer mount point is visible.
  const mounts = await sh(a.client, 'cat /proc/self/mountinfo')
  assert.not.match(mounts, /erofs/)
}))

sandboxTest('mount is refused, and so are device nodes, raw sockets and /proc/sys writes', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const m = await run(client, ['mount', '-t', 'tmpfs', 'x', '/mnt'])
  assert.is.not(m.result.exitCode, 0)
  assert.is((await sh(client, 'grep -c " /mnt " /proc/self/mountinfo || true')).trim(), '0')
  const nod = await run(client, ['mknod', '/tmp/sda', 'b', '8', '0'])
  assert.is.not(nod.result.exitCode, 0)
  assert.is.not((await run(client, ['sh', '-c', 'echo 1 > /proc/sys/kernel/ns_last_pid'])).result.exitCode, 0)
  assert.is.not((await run(client, ['sh', '-c', 'echo h > /proc/sysrq-trigger'])).result.exitCode, 0)
  assert.is.not((await run(client, ['sh', '-c', 'touch /sys/x'])).result.exitCode, 0)
  assert.is.not((await run(client, ['ping', '-c', '1', '-W', '1', '127.0.0.1'])).result.exitCode, 0, 'raw sockets need NET_RAW')
  const status = await sh(client, 'grep -E "^(CapEff|CapBnd|CapPrm|NoNewPrivs)" /proc/self/status')
  // chown dac_override fowner fsetid kill setgid setuid setpcap net_bind_service sys_chroot
  assert.match(status, /CapEff:\s+00000000000405fb/)
  assert.match(status, /CapBnd:\s+00000000000405fb/)
  assert.match(status, /NoNewPrivs:\s+1/)
}))

sandboxTest('/dev holds only the minimal set of devices', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const dev = (await sh(client, 'ls /dev')).split('\n').filter(Boolean).sort()
  assert.equal(dev, ['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero'])
  assert.is(await sh(client, 'head -c 4 /dev/zero | od -An -tx1 | tr -d " \\n"'), '00000000')
  assert.is((await sh(client, 'head -c 16 /dev/urandom | wc -c')).trim(), '16')
  assert.is.not((await run(client, ['sh', '-c', 'echo x > /dev/full'])).result.exitCode, 0)
  assert.is.not((await run(client, ['sh', '-c', 'touch /dev/sda'])).result.exitCode, 0)
  await sh(client, 'echo ok > /dev/shm/x && cat /dev/shm/x')
}))

sandboxTest('host files are unreachable, by any path', timed(10_000, async (defer) => {
  const dir = await runDir()
  const secret = join(dir, 'host-secret')
  await writeFile(secret, 'host secret')
  defer(() => import('node:fs/promises').then((fs) => fs.rm(secret, { force: true })))
  const { client } = await startSandbox(defer)
  const r = await run(client, ['cat', secret])
  assert.is.not(r.result.exitCode, 0)
  for (const path of [secret, `/../../../..${secret}`, `../../${secret}`, `/proc/1/root${secret}`]) {
    try {
      await client.files.read(path)
      assert.unreachable(`read ${path}`)
    } catch (err) {
      assert.ok(isWarrenError(err, ErrorCodes.NOT_FOUND), `${path}: ${String(err)}`)
    }
  }
  // The root holds exactly the layer's directories.
  const root = (await sh(client, 'ls /')).split('\n').filter(Boolean).sort()
  assert.equal(root, ['bin', 'dev', 'etc', 'home', 'mnt', 'proc', 'root', 'sys', 'tmp'])
}))

sandboxTest('a symlink to /etc/shadow reads the sandbox\'s file, never the host\'s', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const hostShadow = await readFile('/etc/shadow', 'utf8')
  await sh(client, 'ln -s /etc/shadow /tmp/shadow; ln -s ../../../../../../etc /tmp/up')
  for (const path of ['/tmp/shadow', '/tmp/up/shadow']) {
    try {
      await client.files.read(path)
      assert.unreachable('the layer has no /etc/shadow')
    } catch (err) {
      assert.ok(isWarrenError(err, ErrorCodes.NOT_FOUND), String(err))
    }
  }
  await client.files.write('/etc/shadow', bytes('sandbox-shadow\n'))
  for (const path of ['/tmp/shadow', '/tmp/up/shadow', '/tmp/../etc/shadow']) {
    const got = text(await client.files.read(path))
    assert.is(got, 'sandbox-shadow\n')
    assert.is.not(got, hostShadow)
  }
  // Writing through the link changes the sandbox's file and leaves the host's alone.
  await client.files.write('/tmp/up/shadow', bytes('rewritten\n'))
  assert.is(await readFile('/etc/shadow', 'utf8'), hostShadow)
  assert.is(text(await client.files.read('/etc/shadow')), 'rewritten\n')
}))

sandboxTest('filling the disk gives ENOSPC inside; the host is unaffected', timed(20_000, async (defer) => {
  const dir = await runDir()
  const freeBefore = statfsSync(dir).bavail * statfsSync(dir).bsize
  const { sb, client } = await startSandbox(defer, { diskMiB: 16 })
  const r = await run(client, ['dd', 'if=/dev/zero', 'of=/big', 'bs=1M', 'count=64'])
  assert.is.not(r.result.exitCode, 0)
  assert.match(r.stderr, /No space left on device/)
  const size = Number((await sh(client, 'wc -c < /big')).trim())
  assert.ok(size <= 16 * 1024 * 1024 && size > 8 * 1024 * 1024, `wrote ${size}`)
  // The sandbox still works once full, and frees space by deleting.
  const w = await client.files.write('/more', new Uint8Array(1024 * 1024)).then(() => 'ok', (e: unknown) => e)
  // The sandbox's own limit, named: not the cluster's room (NO_CAPACITY would say try elsewhere).
  assert.ok(isWarrenError(w, ErrorCodes.QUOTA), String(w))
  assert.is(w.details?.field, 'limits.diskMiB')
  await sh(client, 'rm /big; echo fine > /small; cat /small')
  // The writable layer is private to the sandbox: the host sees an empty directory, same free space.
  assert.equal(await readdir(sb.upperDir), [])
  const freeAfter = statfsSync(dir).bavail * statfsSync(dir).bsize
  assert.ok(freeBefore - freeAfter < 8 * 1024 * 1024, `host lost ${freeBefore - freeAfter} bytes`)
}))

registerLeftoverCheck()
test.run()
