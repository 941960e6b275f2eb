/**
 * Finding 7: the seccomp filter of sandbox commands is an allow-list. A tenant runs a static
 * binary of its own in a container sandbox and issues raw system calls: calls the list does not
 * name (among them ones this kernel has but that are newer than the list) fail with ENOSYS,
 * calls refused on purpose with EPERM, other ABIs (i386 int 0x80, x32) never run; and the
 * workloads people run (python3, pip, gcc) still work in a Debian layer.
 */
import { arch, tmpdir } from 'node:os'
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { ALL_SCOPES, DEBIAN_CACHE, debianLayer, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'
import { containerSkip, staticFixture, tenantCluster } from './support.js'

const ctest = containerSkip === undefined && (arch() === 'x64' || arch() === 'arm64') ? test : test.skip
if (containerSkip !== undefined) console.log(`seccomp tests skipped: ${containerSkip}`)

const EPERM = 1
const ENOSYS = 38
const EAFNOSUPPORT = 97

/** Syscall numbers of the two supported architectures (the generic table on arm64). */
const NR = arch() === 'x64'
  ? { getpid: 39, socket: 41, mount: 165, sysfs: 139, kcmp: 312, add_key: 248, unshare: 272, open_by_handle_at: 304, kexec_file_load: 320, modify_ldt: 154 }
  : { getpid: 172, socket: 198, mount: 40, sysfs: undefined, kcmp: 272, add_key: 217, unshare: 97, open_by_handle_at: 265, kexec_file_load: 294, modify_ldt: undefined }

/** [what, argv of rawsys, the answer expected] */
const cases: Array<[string, string[], string]> = [
  ['getpid still works', [String(NR.getpid)], 'ok '],
  // Not on the list, though this kernel has them: an allow-list refuses them, a deny-list ran them.
  ['mseal (462), newer than the list', ['462', '0', '0', '0'], `err ${ENOSYS}`],
  ['listmount (458), newer than the list', ['458', '0', '0', '0', '0'], `err ${ENOSYS}`],
  ['kcmp, not on the list', [String(NR.kcmp), '1', '1', '0', '0', '0'], `err ${ENOSYS}`],
  ['an unassigned number a future kernel may take', ['1000'], `err ${ENOSYS}`],
  // Named and refused.
  ['kexec_file_load', [String(NR.kexec_file_load), '0', '0', '0', '0', '0'], `err ${EPERM}`],
  ['open_by_handle_at', [String(NR.open_by_handle_at), '0', '0', '0'], `err ${EPERM}`],
  ['add_key', [String(NR.add_key), '0', '0', '0', '0', '0'], `err ${EPERM}`],
  ['unshare(CLONE_NEWUSER)', [String(NR.unshare), '0x10000000'], `err ${EPERM}`],
  ['mount', [String(NR.mount), '0', '0', '0', '0', '0'], `err ${EPERM}`],
  ['socket(AF_VSOCK), a way to the host', [String(NR.socket), '40', '1', '0'], `err ${EAFNOSUPPORT}`]
]
if (NR.sysfs !== undefined) cases.push(['sysfs, an obsolete call', [String(NR.sysfs), '3'], `err ${ENOSYS}`])
if (NR.modify_ldt !== undefined) cases.push(['modify_ldt', [String(NR.modify_ldt), '0', '0', '0'], `err ${ENOSYS}`])
// x32 getpid: the x32 ABI is another set of numbers on the same architecture token.
if (arch() === 'x64') cases.push(['an x32 call', [String(0x40000000 + 39)], `err ${ENOSYS}`])

ctest('raw system calls not on the allow-list fail with ENOSYS, refused ones with EPERM, other ABIs never run', timed(120_000, async (defer) => {
  const tmp = mkdtempSync(join(tmpdir(), 'warren-sec-bin-'))
  defer(() => rmSync(tmp, { recursive: true, force: true }))
  const rawsys = staticFixture('rawsys', tmp)
  const { client } = await tenantCluster(defer, 'sec-seccomp')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  await sb.files.write('/tmp/rawsys', rawsys)
  assert.is((await sb.exec(['chmod', '755', '/tmp/rawsys'])).exitCode, 0)

  const wrong: string[] = []
  for (const [what, argv, want] of cases) {
    const r = await sb.exec(['/tmp/rawsys', ...argv])
    const got = r.exitCode === 0 ? r.stdout.trim() : `exit ${r.exitCode} ${r.stderr.trim()}`
    if (!got.startsWith(want)) wrong.push(`${what}: want "${want}", got "${got}"`)
  }
  assert.equal(wrong, [], wrong.join('\n'))

  if (arch() === 'x64') {
    // i386 getpid through int 0x80: ENOSYS from the filter, or SIGSEGV where the kernel has no
    // i386 ABI at all (ia32_emulation off). It must never run.
    const r = await sb.exec(['/tmp/rawsys', 'int80', '20'])
    const got = r.exitCode === 0 ? r.stdout.trim() : `exit ${r.exitCode}`
    assert.ok(got === `err ${ENOSYS}` || got === 'exit 139', `int 0x80: ${got}`)
  }
}))

/** The Debian layer of these tests, built once and cached between runs (about two minutes the first time). */
const DEBIAN_PACKAGES = ['python3', 'python3-pip', 'gcc', 'libc6-dev']

ctest('python3 (threads, subprocesses, sockets), pip and gcc work under the filter', timed(900_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-sec-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const layer = await debianLayer(DEBIAN_PACKAGES)
  const digest = layer.digest
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'sec-debian', dataDir: join(dir, 'node'), layersDir: DEBIAN_CACHE })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', image: { base: digest }, limits: { memoryMiB: 1024 } })
  defer(() => sb.kill())

  const py = [
    'import socket, subprocess, threading, os, tempfile',
    'out = []',
    't = threading.Thread(target=lambda: out.append(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip()))',
    't.start(); t.join()',
    'a, b = socket.socketpair(); a.send(b"x"); out.append(b.recv(1).decode())',
    's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); out.append("listen")',
    'with tempfile.NamedTemporaryFile() as f: os.chmod(f.name, 0o600); out.append(str(os.stat(f.name).st_mode & 0o777))',
    'print(" ".join(out), os.cpu_count() > 0)'
  ].join('\n')
  await sb.files.write('/root/t.py', py)
  const p = await sb.exec(['python3', '/root/t.py'])
  assert.is(p.exitCode, 0, p.stderr)
  assert.is(p.stdout, 'child x listen 384 True\n')

  const pip = await sb.exec(['python3', '-m', 'pip', '--version'])
  assert.is(pip.exitCode, 0, pip.stderr)
  assert.match(pip.stdout, /^pip \d+/)

  await sb.files.write('/root/hello.c', '#include <stdio.h>\n#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); puts("compiled and ran"); return 0; }\n')
  const cc = await sb.exec(['sh', '-c', 'cd /root && gcc -O2 -pthread -o hello hello.c && ./hello'])
  assert.is(cc.exitCode, 0, cc.stderr)
  assert.is(cc.stdout, 'compiled and ran\n')
}))

test.run()
