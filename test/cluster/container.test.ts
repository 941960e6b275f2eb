import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ContainerDefaults, detectLayout } from '../../src/backends/container/index.js'
import { containerUnavailable, startNode, type ControlPlane } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { pushLayer } from '../../src/images/blob/index.js'
import { buildLayerFromDir } from '../../src/images/index.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, DEBIAN_CACHE, debianPythonLayer, spawnNode, startTestControlPlane, type NodeChild } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container cluster tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

/** The cgroup directories a node's parent group still has, in every hierarchy. */
function leftoverCgroups (parent: string): string[] {
  const out: string[] = []
  for (const place of Object.values(detectLayout())) {
    const dir = join(place.mount, parent)
    if (existsSync(dir)) out.push(dir)
  }
  return out
}

function hostMounts (): number {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').length
}

/** A temporary directory, a control plane here, one `warren node` process and a client: all ended with the test. */
async function containerCluster (defer: (fn: () => unknown) => void, nodeId: string, nodeArgs: string[] = []): Promise<{ dir: string, cp: ControlPlane, node: NodeChild, client: Client }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-ct-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, nodeId, join(dir, 'node'), nodeArgs)
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { dir, cp, node, client }
}

ctest('a container sandbox through the whole path: exec, hostname, files, kill reclaims everything', timed(120_000, async (defer) => {
  const mountsBefore = hostMounts()
  const { node, client } = await containerCluster(defer, 'cn1')

  const sb = await client.create({ backend: 'container', limits: { memoryMiB: 256, cpus: 0.5 } })
  const r = await sb.exec(['sh', '-c', 'hostname; echo err >&2; exit 7'])
  assert.is(r.stdout, `${sb.id}\n`)
  assert.is(r.stderr, 'err\n')
  assert.is(r.exitCode, 7)
  await sb.files.write('/tmp/a/b.txt', 'hello')
  assert.is(new TextDecoder().decode(await sb.files.read('/tmp/a/b.txt')), 'hello')
  await sb.exec(['ln', '-s', '/etc/shadow', '/tmp/shadow'])
  const shadow = await sb.files.read('/tmp/shadow').catch((e: unknown) => e)
  // The sandbox has no /etc/shadow of its own: the link resolves inside it, never to the host's.
  assert.ok(isWarrenError(shadow, ErrorCodes.NOT_FOUND), String(shadow))
  const bg = await sb.exec(['sh', '-c', 'sleep 1000 >/dev/null 2>&1 & echo started'])
  assert.is(bg.stdout, 'started\n')
  assert.match((await sb.exec(['ps'])).stdout, /sleep 1000/)

  await sb.kill()
  await waitFor(() => sb.state === 'gone', 10_000, 'gone')
  const runDir = join(ContainerDefaults.runDir, 'cn1')
  assert.not.ok(existsSync(join(runDir, sb.id)), 'its host directory is gone')
  // A warm pool may hold a ready sandbox; a node that stops reclaims those too.
  await node.kill('SIGTERM')
  assert.ok(!existsSync(runDir) || readdirSync(runDir).length === 0, 'run directory emptied')
  assert.is(hostMounts(), mountsBefore, 'no mounts left on the host')
  assert.equal(leftoverCgroups('warren-cn1'), [], 'no cgroups left behind')
}))

ctest('commands run under a seccomp filter: no new user namespace, no kernel log, no keyring or mounts; ordinary work is untouched', timed(120_000, async (defer) => {
  const { client } = await containerCluster(defer, 'cn-seccomp')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())

  const seccomp = await sb.exec(['sh', '-c', 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status'])
  assert.match(seccomp.stdout, /NoNewPrivs:\s+1/)
  assert.match(seccomp.stdout, /Seccomp:\s+2/, 'filter mode')
  for (const argv of [['unshare', '-U', 'true'], ['unshare', '-r', 'true'], ['dmesg'], ['mount', '-t', 'tmpfs', 'x', '/mnt']]) {
    const r = await sb.exec(argv)
    assert.is.not(r.exitCode, 0, `${argv.join(' ')} must fail`)
    assert.match(r.stderr, /not permitted|permission denied/i, `${argv.join(' ')}: ${r.stderr}`)
  }
  // Threads, processes and pipes (clone without CLONE_NEWUSER) work as ever.
  const ok = await sb.exec(['sh', '-c', '(echo a; sleep 0.1; echo b) | cat & wait; echo done'])
  assert.is(ok.stdout, 'a\nb\ndone\n')
}))

ctest('a sandbox whose init dies by itself ends as failed, and its owner is told why', timed(120_000, async (defer) => {
  const { dir, client } = await containerCluster(defer, 'cn-init')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  // The journal says which host process is this sandbox's init (a pooled one has another id).
  const journalDir = join(dir, 'node', 'container', 'journal')
  // Only whole records: a `.tmp` beside them is a write under way, and a pooled sandbox's record
  // may be removed between the listing and the read.
  const read = (f: string): { launched: { pid: number }, meta?: { id?: string } } | undefined => {
    try { return JSON.parse(readFileSync(join(journalDir, f), 'utf8')) as { launched: { pid: number }, meta?: { id?: string } } } catch { return undefined }
  }
  const record = readdirSync(journalDir).filter((f) => f.endsWith('.json')).map(read)
    .find((r) => r?.meta?.id === sb.id)
  assert.ok(record !== undefined, 'journal record of the sandbox')
  process.kill(record.launched.pid, 'SIGKILL')
  await waitFor(async () => (await sb.info()).state === 'gone', 20_000, 'sandbox ended')
  const info = await sb.info()
  assert.is(info.reason, 'failed')
  assert.match(info.message ?? '', /init process ended/)
}))

ctest('files that fill a container\'s memory end in oom, whichever process the kernel kills: the command\'s, or the sandbox\'s init', timed(120_000, async (defer) => {
  const { client } = await containerCluster(defer, 'cn-oom')
  // The writable layer is memory: 1 GiB of disk in 64 MiB of memory runs out of memory first.
  const sb = await client.create({ backend: 'container', limits: { memoryMiB: 64, diskMiB: 1024 } })
  defer(() => sb.kill())
  // The writer is the command's own process (no shell that would turn its kill into an exit code).
  const r = await sb.exec(['dd', 'if=/dev/zero', 'of=/fill', 'bs=1048576', 'count=200'], { timeoutMs: 60_000 }).catch((e: unknown) => e)
  await waitFor(async () => { const s = (await sb.info().catch(() => undefined))?.state; return s !== 'ready' || (r as { reason?: string }).reason !== undefined }, 20_000, `an end (the command: ${JSON.stringify(r).slice(0, 300)})`)
  const info = await sb.info()
  if (info.state === 'ready') assert.is((r as { reason?: string }).reason, 'oom', JSON.stringify(r))
  else assert.equal([info.state, info.reason], ['failed', 'oom'], JSON.stringify(info))
}))

ctest('egress: a sandbox reaches what its allow-list names through the proxy and nothing else; without egress, nothing at all', timed(120_000, async (defer) => {
  // The web server stands in for an outside host: on loopback, so reachable only as the operator pins it.
  const web = createServer((req, res) => res.end(`outside ${req.url ?? ''}\n`))
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => web.close())
  const port = (web.address() as AddressInfo).port
  const { client } = await containerCluster(defer, 'cn-egress', ['--egress-host', `web.test=127.0.0.1:${port}`])
  const sb = await client.create({ backend: 'container', network: { egress: [`web.test:${port}`] } })
  defer(() => sb.kill())
  assert.is((await sb.exec(['wget', '-q', '-O', '-', `http://web.test:${port}/allowed`])).stdout, 'outside /allowed\n')
  const tunnel = await sb.exec(['sh', '-c', `(printf 'CONNECT web.test:${port} HTTP/1.1\\r\\n\\r\\nGET /tunnel HTTP/1.0\\r\\n\\r\\n'; sleep 1) | nc 127.0.0.1 3128`])
  assert.match(tunnel.stdout, /200 Connection Established[\s\S]*outside \/tunnel/)
  const other = await sb.exec(['wget', '-q', '-O', '-', `http://127.0.0.2:${port}/`])
  assert.is.not(other.exitCode, 0)
  assert.match(other.stderr, /403/)
  // Without egress the sandbox has loopback only: nothing listens on 3128, no route anywhere.
  const closed = await client.create({ backend: 'container' })
  defer(() => closed.kill())
  const none = await closed.exec(['wget', '-q', '-O', '-', `http://127.0.0.1:${port}/`])
  assert.is.not(none.exitCode, 0)
  assert.match(none.stderr, /refused/)
  // Bad allow-lists are the spec's error.
  const bad = await client.create({ backend: 'container', network: { egress: ['http://pypi.org'] } }).catch((e: unknown) => e)
  assert.ok(isWarrenError(bad, ErrorCodes.BAD_SPEC))
  const notHere = await client.create({ backend: 'function', network: { egress: ['pypi.org'] } }).catch((e: unknown) => e)
  assert.ok(isWarrenError(notHere, ErrorCodes.BAD_SPEC) && notHere.details?.field === 'network.egress')
}))

ctest('interactive stdin: a spawned shell answers each line as it is written; 3 MiB through cat arrive whole; closeStdin ends it', timed(120_000, async (defer) => {
  const { client } = await containerCluster(defer, 'cn-stdin')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())

  // Each answer is read before the next line is written: the command really runs while we write.
  const shell = sb.spawn(['sh', '-c', 'while read -r line; do echo "got $line"; done; echo bye'], { openStdin: true })
  const out = shell[Symbol.asyncIterator]()
  let seen = ''
  for (const word of ['alpha', 'beta', 'gamma']) {
    await shell.write(`${word}\n`)
    while (!seen.includes(`got ${word}\n`)) {
      const next = await out.next()
      assert.not.ok(next.done, `ended before answering ${word}`)
      seen += new TextDecoder().decode(next.value.data)
    }
  }
  await shell.closeStdin()
  for (let next = await out.next(); next.done !== true; next = await out.next()) seen += new TextDecoder().decode(next.value.data)
  assert.is(seen, 'got alpha\ngot beta\ngot gamma\nbye\n')
  assert.is((await shell.wait()).exitCode, 0)

  // More than the sandbox buffers (1 MiB): the writes wait for the command to read.
  const data = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7) % 251)
  const sum = sb.spawn(['sh', '-c', 'cat | md5sum'], { openStdin: true })
  for (let at = 0; at < data.length; at += 200_000) await sum.write(data.subarray(at, at + 200_000))
  await sum.closeStdin()
  let text = ''
  for await (const chunk of sum) text += new TextDecoder().decode(chunk.data)
  assert.is(text.split(' ')[0], createHash('md5').update(data).digest('hex'))
  assert.is((await sum.wait()).exitCode, 0)

  // Writing to a command that has ended goes nowhere, without error.
  const quick = sb.spawn(['true'], { openStdin: true })
  await quick.wait()
  await quick.write('ignored\n')
  // The trajectory records what went in.
  const sent = (await sb.trajectory()).steps.find((s) => s.kind === 'exec' && s.execId === sum.execId)
  assert.is(sent?.kind === 'exec' ? sent.stdin?.bytes : undefined, data.length)
}))

ctest('kill -9 the node agent, restart it: the running sandbox is re-adopted and still answers', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-ct-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const web = createServer((_req, res) => res.end('still out\n'))
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => web.close())
  const port = (web.address() as AddressInfo).port
  const pinned = ['--egress-host', `web.test=127.0.0.1:${port}`]
  const first = await spawnNode(cp, 'cn2', join(dir, 'node'), pinned)
  defer(() => first.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', network: { egress: [`web.test:${port}`] } })
  await sb.exec(['sh', '-c', 'echo kept > /tmp/state'])

  await first.kill('SIGKILL')
  // The silent node is declared lost, and so is its sandbox: the handle hears it...
  await waitFor(() => sb.state === 'lost', 10_000, 'lost with its node')
  const second = await spawnNode(cp, 'cn2', join(dir, 'node'), pinned)
  defer(() => second.kill())
  // ...and hears it ready again once the restarted node has re-adopted it.
  await waitFor(() => sb.state === 'ready', 10_000, 'the same handle ready again')
  const again = await client.attach(sb.id)
  await waitFor(async () => (await again.info()).state === 'ready', 10_000, 'ready again')
  const r = await again.exec(['cat', '/tmp/state'])
  assert.is(r.stdout, 'kept\n')
  // Its egress proxy died with the old agent; the new one listens where the sandbox looks.
  assert.is((await again.exec(['wget', '-q', '-O', '-', `http://web.test:${port}/`])).stdout, 'still out\n')
  await again.kill()
  await second.kill('SIGTERM')
  assert.equal(leftoverCgroups('warren-cn2'), [], 'no cgroups left behind')
}))

ctest('a realistic Debian layer with python3 (debootstrap, cached between runs): a sandbox runs python', timed(600_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-ct-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  // The tree outlives the test: the first run debootstraps it (about half a minute), later runs
  // reuse it. The operator fills the node's layer store; the create names the layer's digest.
  const layer = await debianPythonLayer((line) => { if (line.startsWith('I: Retrieving') === false) process.stdout.write(`  debootstrap: ${line}\n`) })
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'cpy', dataDir: join(dir, 'node'), layersDir: DEBIAN_CACHE })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container', image: { base: layer.digest }, deadlineMs: 5000 })
  const r = await sb.exec(['python3', '-c', 'import sys, platform; print(sys.version_info[0], platform.node())'])
  assert.is(r.exitCode, 0, r.stderr)
  assert.is(r.stdout, `3 ${sb.id}\n`)
  await sb.files.write('/root/task.py', 'print(sum(range(10)))\n')
  assert.is((await sb.exec(['python3', '/root/task.py'])).stdout, '45\n')
  await sb.kill()
}))

ctest('placement prefers the node that already caches a sandbox\'s layers', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-ct-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  // A layer in the control plane's blob store, named by digest.
  const tree = join(dir, 'tree')
  mkdirSync(join(tree, 'bin'), { recursive: true })
  copyFileSync('/bin/busybox', join(tree, 'bin', 'sh'))
  chmodSync(join(tree, 'bin', 'sh'), 0o755)
  const built = await buildLayerFromDir(tree, join(dir, 'build'))
  const pushed = await pushLayer(join(dir, 'cp', 'blobs'), built.path)
  const nodes = []
  for (const id of ['la', 'lb']) {
    const n = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: id, dataDir: join(dir, id), heartbeatEveryMs: 100 })
    defer(() => n.close())
    nodes.push(n)
  }
  const client = await connect({ url: cp.url, token: await cp.createToken('t', ['admin']) })
  defer(() => client.close())
  const spec = { backend: 'container' as const, image: { base: pushed.digest }, limits: { cpus: 0.1, memoryMiB: 64 } }
  const first = await client.create(spec)
  const home = (await first.info()).nodeId
  await waitFor(async () => (await client.nodes() as Array<{ id: string, layers: string[] }>).find((n) => n.id === home)?.layers.includes(pushed.digest), 20_000, 'the layer reported')
  for (let i = 0; i < 6; i++) assert.is((await (await client.create(spec)).info()).nodeId, home)
}))

test.run()
