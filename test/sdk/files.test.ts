/**
 * Files of any size through the public SDK against a real cluster (a control plane and a node
 * in this process, container sandboxes): streamed both ways byte-exact, every file operation
 * with its errors, trees up and down with modes and symlinks, the cluster's maximum size, paths
 * that try to climb out, and another tenant's sandbox.
 */
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, FilesDefaults, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type ErrorCode, type WarrenError } from '../../src/errors.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`sdk files tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const MiB = 1024 * 1024
/** The node's maximum file size in these tests: above the 64 MiB the round trip moves, small enough to pass quickly. */
const MAX_FILE = 72 * MiB

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

async function refused (p: Promise<unknown>, code: ErrorCode, field?: string): Promise<WarrenError> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code), `expected ${code}, got ${String(err)}`)
  if (field !== undefined) assert.is((err.details as { field?: unknown } | undefined)?.field, field, `field of ${String(err)}`)
  return err
}

interface Cluster { dir: string, client: Client, other: Client, sb: Sandbox }

/** A control plane and a container node here, a tenant's client with a sandbox, and another tenant's client. */
async function cluster (defer: (fn: () => unknown) => void): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-files-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 15_000 })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'files', dataDir: join(dir, 'node'), containerPool: { max: 0 }, files: { maxFileBytes: MAX_FILE } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  const other = await connect({ url: cp.url, token: await cp.createToken('tenant-b', [...ALL_SCOPES]) })
  defer(() => other.close())
  const sb = await client.create({ backend: 'container', limits: { memoryMiB: 256, cpus: 1, diskMiB: 1024 } })
  defer(() => sb.kill())
  return { dir, client, other, sb }
}

async function * slowly (data: Uint8Array, piece: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < data.length; at += piece) yield data.subarray(at, at + piece)
}

ctest('64 MiB up as bytes and down as a stream arrive byte-exact (sha256), and the shell sees the same file', timed(180_000, async (defer) => {
  const { sb } = await cluster(defer)
  const data = randomBytes(64 * MiB)
  const info = await sb.files.write('/data/big.bin', data, { mode: 0o640 })
  assert.is(info.size, data.length)
  assert.is(info.sha256, sha(data))
  const r = await sb.exec(['sh', '-c', 'sha256sum /data/big.bin; stat -c %a /data/big.bin; ls -a /data'])
  assert.is(r.stdout, `${sha(data)}  /data/big.bin\n640\n.\n..\nbig.bin\n`, 'no temporary file is left beside it')

  const hash = createHash('sha256')
  let chunks = 0
  let bytes = 0
  for await (const chunk of sb.files.readStream('/data/big.bin') as unknown as AsyncIterable<Uint8Array>) {
    assert.ok(chunk.byteLength < 1 * MiB, 'each chunk fits a frame')
    hash.update(chunk)
    bytes += chunk.byteLength
    chunks++
  }
  assert.is(bytes, data.length)
  assert.is(hash.digest('hex'), sha(data))
  assert.ok(chunks > 64, `${chunks} chunks`)
  assert.ok(Buffer.from(await sb.files.read('/data/big.bin')).equals(data), 'read() as bytes too')
}))

ctest('a write takes a stream (Node Readable, web ReadableStream, async iterable of odd pieces) and strings; read gives text', timed(60_000, async (defer) => {
  const { sb } = await cluster(defer)
  const data = randomBytes(3 * MiB + 12345)
  await sb.files.write('/s/readable', Readable.from(slowly(data, 100_000)))
  assert.is(sha(await sb.files.read('/s/readable')), sha(data))
  const web = new ReadableStream<Uint8Array>({ start (c) { c.enqueue(data.subarray(0, 7)); c.enqueue(data.subarray(7)); c.close() } })
  await sb.files.write('/s/web', web)
  assert.is(sha(await sb.files.read('/s/web')), sha(data))
  await sb.files.write('/s/iter', slowly(data, 777_777))
  assert.is(sha(await sb.files.read('/s/iter')), sha(data))
  await sb.files.write('/s/text', 'héllo\n')
  assert.is(await sb.files.read('/s/text', { format: 'text' }), 'héllo\n')
  await sb.files.write('/s/empty', new Uint8Array(0))
  assert.is((await sb.files.read('/s/empty')).length, 0)
  const stream = await sb.files.read('/s/text', { format: 'stream' })
  const parts: Uint8Array[] = []
  for await (const p of stream as unknown as AsyncIterable<Uint8Array>) parts.push(p)
  assert.is(Buffer.concat(parts).toString(), 'héllo\n')
  assert.match(await sb.files.read('/proc/self/status', { format: 'text' }), /^Name:/, 'files that say size 0 are read to their end')
}))

ctest('list, stat, exists, mkdir, remove and rename do what they say, with the errors they should give', timed(60_000, async (defer) => {
  const { sb } = await cluster(defer)
  await sb.files.mkdir('/w/a/b', { parents: true })
  await sb.files.mkdir('/w/a/b', { parents: true })
  await refused(sb.files.mkdir('/w/a/b'), ErrorCodes.INVALID_ARGUMENT)
  await refused(sb.files.mkdir('/w/none/x'), ErrorCodes.NOT_FOUND)
  await sb.files.write('/w/a/f.txt', 'abc', { mode: 0o600 })
  await sb.exec(['ln', '-s', 'f.txt', '/w/a/link'])
  const entries = (await sb.files.list('/w/a')).sort((x, y) => x.name.localeCompare(y.name))
  assert.equal(entries.map((e) => [e.name, e.path, e.type]), [['b', '/w/a/b', 'dir'], ['f.txt', '/w/a/f.txt', 'file'], ['link', '/w/a/link', 'symlink']])
  const f = entries[1]!
  assert.is(f.size, 3)
  assert.is(f.mode, 0o600)
  assert.ok(Math.abs(f.mtimeMs - Date.now()) < 60_000)
  const st = await sb.files.stat('/w/a/link')
  assert.is(st.type, 'symlink')
  assert.is(st.target, 'f.txt')
  assert.is((await sb.files.stat('/w/a/link', { follow: true })).type, 'file')
  assert.is(await sb.files.exists('/w/a/f.txt'), true)
  assert.is(await sb.files.exists('/w/a/nope'), false)
  await sb.files.rename('/w/a/f.txt', '/w/a/b/g.txt')
  assert.is(await sb.files.read('/w/a/b/g.txt', { format: 'text' }), 'abc')
  assert.is(await sb.files.exists('/w/a/f.txt'), false)
  await refused(sb.files.rename('/w/missing', '/w/x'), ErrorCodes.NOT_FOUND)
  await refused(sb.files.remove('/w/a'), ErrorCodes.INVALID_ARGUMENT)
  await sb.files.remove('/w/a', { recursive: true })
  assert.is(await sb.files.exists('/w/a'), false)
  await refused(sb.files.remove('/w/a'), ErrorCodes.NOT_FOUND)

  await refused(sb.files.read('/no/such/file'), ErrorCodes.NOT_FOUND)
  await refused(sb.files.read('/w'), ErrorCodes.INVALID_ARGUMENT, 'path')
  await refused(sb.files.write('/w', 'x'), ErrorCodes.INVALID_ARGUMENT, 'path')
  await refused(sb.files.list('/etc/passwd'), ErrorCodes.NOT_FOUND)
  await refused(sb.files.stat(''), ErrorCodes.INVALID_ARGUMENT, 'path')
  await refused(sb.files.stat('/a\0b'), ErrorCodes.INVALID_ARGUMENT)
  await refused(sb.files.mkdir('/w/m', { mode: 0o17777 }), ErrorCodes.INVALID_ARGUMENT, 'mode')
  // What the sandbox's file system refuses names path, and the path the caller gave: never the
  // upload's temporary name beside it.
  await refused(sb.files.read('/no/such/file'), ErrorCodes.NOT_FOUND, 'path')
  await refused(sb.files.write(`/w/${'x'.repeat(300)}`, 'a'), ErrorCodes.INVALID_ARGUMENT, 'path')
  const inProc = await refused(sb.files.write('/proc/sysrq-trigger', 'h'), ErrorCodes.NOT_FOUND, 'path')
  assert.match(inProc.message, /\/proc\/sysrq-trigger/)
  assert.not.match(inProc.message, /warren-upload/)
}))

ctest('past the cluster maximum a file is refused naming size: declared, streamed, or read; nothing is left behind', timed(90_000, async (defer) => {
  const { sb, client } = await cluster(defer)
  await refused(sb.files.write('/big/declared', new Uint8Array(MAX_FILE + 1)), ErrorCodes.INVALID_ARGUMENT, 'size')
  await refused(sb.files.write('/big/streamed', slowly(new Uint8Array(MAX_FILE + 1), 1 * MiB)), ErrorCodes.INVALID_ARGUMENT, 'size')
  assert.equal((await sb.files.list('/big')).map((e) => e.name), [], 'no temporary file stays')
  // The node's own check, whatever a client claims: a chunk that crosses the maximum.
  await raw(client, sb.id, { op: 'write-begin', upload: 'raw1', path: '/big/raw' })
  await refused(raw(client, sb.id, { op: 'write-chunk', upload: 'raw1', offset: MAX_FILE - 10, data: new Uint8Array(11) }), ErrorCodes.INVALID_ARGUMENT, 'size')
  await refused(raw(client, sb.id, { op: 'write-chunk', upload: 'raw1', offset: 0, data: new Uint8Array(1000 * 1024) }), ErrorCodes.INVALID_ARGUMENT, 'data')
  await refused(raw(client, sb.id, { op: 'write-end', upload: 'raw1', size: 5 }), ErrorCodes.INVALID_ARGUMENT, 'size')
  assert.is(await sb.files.exists('/big/raw'), false, 'a mismatched upload does not take the name')
  await refused(raw(client, sb.id, { op: 'read', path: '/etc/passwd', offset: 0, length: 2 * MiB }), ErrorCodes.INVALID_ARGUMENT, 'length')
  await refused(raw(client, sb.id, { op: 'write-begin', upload: '../x', path: '/big/raw' }), ErrorCodes.INVALID_ARGUMENT, 'upload')
  // A file made inside the sandbox past the maximum cannot be read out.
  await sb.exec(['sh', '-c', `dd if=/dev/zero of=/big/made bs=1M count=0 seek=${MAX_FILE / MiB + 1} 2>/dev/null`])
  await refused(sb.files.read('/big/made'), ErrorCodes.INVALID_ARGUMENT, 'size')
}))

ctest('an upload whose sha256 does not match is refused and leaves the old file as it was', timed(30_000, async (defer) => {
  const { sb, client } = await cluster(defer)
  await sb.files.write('/k/f', 'old')
  const req = (r: Record<string, unknown>): Promise<unknown> => raw(client, sb.id, r)
  await req({ op: 'write-begin', upload: 'u1', path: '/k/f' })
  await req({ op: 'write-chunk', upload: 'u1', offset: 0, data: Buffer.from('new!') })
  await req({ op: 'write-chunk', upload: 'u1', offset: 0, data: Buffer.from('new!') }) // re-sent: the same bytes
  await refused(req({ op: 'write-end', upload: 'u1', size: 4, sha256: 'ab'.repeat(32) }), ErrorCodes.INVALID_ARGUMENT, 'sha256')
  assert.is(await sb.files.read('/k/f', { format: 'text' }), 'old')
  // Out of order and repeated chunks make the same file.
  await req({ op: 'write-begin', upload: 'u2', path: '/k/f' })
  await req({ op: 'write-chunk', upload: 'u2', offset: 3, data: Buffer.from('def') })
  await req({ op: 'write-chunk', upload: 'u2', offset: 0, data: Buffer.from('abc') })
  await req({ op: 'write-chunk', upload: 'u2', offset: 0, data: Buffer.from('abc') })
  const end = await req({ op: 'write-end', upload: 'u2', size: 6, sha256: sha(Buffer.from('abcdef')) })
  assert.equal(end, { size: 6, sha256: sha(Buffer.from('abcdef')) })
  assert.equal(await req({ op: 'write-end', upload: 'u2', size: 6 }), end, 'an end retried after it succeeded answers the same')
  assert.is(await sb.files.read('/k/f', { format: 'text' }), 'abcdef')
  assert.equal((await sb.files.list('/k')).map((e) => e.name), ['f'])
}))

ctest('paths climbing out of the sandbox stay inside it: ../../etc/shadow is the sandbox\'s own', timed(30_000, async (defer) => {
  const { sb } = await cluster(defer)
  const host = readFileSync('/etc/hostname')
  await sb.files.write('/tmp/../../../../etc/hostname-probe', 'inside')
  assert.is((await sb.exec(['cat', '/etc/hostname-probe'])).stdout, 'inside')
  assert.is(existsSync('/etc/hostname-probe'), false, 'nothing written on the host')
  assert.ok(readFileSync('/etc/hostname').equals(host))
  const shadow = await sb.files.read('../../etc/shadow').then((b) => Buffer.from(b).toString(), (e: unknown) => e)
  if (typeof shadow === 'string') assert.is.not(shadow, readFileSync('/etc/shadow', 'utf8'), 'not the host\'s shadow')
  else assert.ok(isWarrenError(shadow), String(shadow))
  await sb.exec(['ln', '-s', '/../../../../', '/tmp/up'])
  assert.equal((await sb.files.list('/tmp/up')).map((e) => e.name).sort(), (await sb.files.list('/')).map((e) => e.name).sort(), 'a link to above the root is the root')
}))

ctest('upload and download of a tree keep contents, modes and symlinks (as links); a single file goes too', timed(90_000, async (defer) => {
  const { sb, dir } = await cluster(defer)
  const src = join(dir, 'src')
  mkdirSync(join(src, 'sub', 'deep'), { recursive: true })
  const big = randomBytes(3 * MiB + 5)
  writeFileSync(join(src, 'big.bin'), big)
  writeFileSync(join(src, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 })
  writeFileSync(join(src, 'sub', 'secret'), 's', { mode: 0o600 })
  writeFileSync(join(src, 'sub', 'deep', 'empty'), '')
  symlinkSync('../run.sh', join(src, 'sub', 'link'))
  symlinkSync('/etc/passwd', join(src, 'abs-link'))
  const up = await sb.files.upload(src, '/proj')
  assert.ok(up.size > big.length)
  const r = await sb.exec(['sh', '-c', 'cd /proj && stat -c "%n %a %F" run.sh sub/secret sub/deep/empty && readlink sub/link && readlink abs-link && ./run.sh && sha256sum big.bin'])
  assert.is(r.stdout, `run.sh 755 regular file\nsub/secret 600 regular file\nsub/deep/empty 644 regular empty file\n../run.sh\n/etc/passwd\nran\n${sha(big)}  big.bin\n`)

  const out = join(dir, 'out')
  await sb.exec(['sh', '-c', 'mkdir -p /proj/made && echo m > /proj/made/m.txt && chmod 700 /proj/made'])
  await sb.files.download('/proj', out)
  assert.ok(readFileSync(join(out, 'big.bin')).equals(big))
  assert.is(statSync(join(out, 'run.sh')).mode & 0o7777, 0o755)
  assert.is(statSync(join(out, 'sub', 'secret')).mode & 0o7777, 0o600)
  assert.is(statSync(join(out, 'made')).mode & 0o7777, 0o700)
  assert.is(readFileSync(join(out, 'made', 'm.txt'), 'utf8'), 'm\n')
  assert.ok(lstatSync(join(out, 'sub', 'link')).isSymbolicLink())
  assert.is(readlinkSync(join(out, 'sub', 'link')), '../run.sh')
  assert.is(readlinkSync(join(out, 'abs-link')), '/etc/passwd')
  assert.is(readFileSync(join(out, 'sub', 'deep', 'empty')).length, 0)

  await sb.files.upload(join(src, 'run.sh'), '/single/run.sh')
  assert.is((await sb.exec(['sh', '-c', 'stat -c %a /single/run.sh'])).stdout, '755\n')
  await sb.files.download('/single/run.sh', join(dir, 'one.sh'))
  assert.is(readFileSync(join(dir, 'one.sh'), 'utf8'), '#!/bin/sh\necho ran\n')
}))

ctest('a tree download cannot write outside localPath: a symlink in the sandbox tree is made, never followed', timed(60_000, async (defer) => {
  const { sb, dir } = await cluster(defer)
  const victim = join(dir, 'victim')
  mkdirSync(victim)
  // In the sandbox: a link pointing out of the target on the trainer's machine, and a directory beside it.
  await sb.exec(['sh', '-c', `mkdir -p /t/d && echo x > /t/d/f && ln -s ${victim} /t/esc && ln -s ../../.. /t/up`])
  const out = join(dir, 'out')
  await sb.files.download('/t', out)
  assert.ok(lstatSync(join(out, 'esc')).isSymbolicLink())
  assert.equal(readdirNames(victim), [], 'nothing was written through the link')
  // A local link already in the way is not followed either: the member that would go through it is refused.
  const out2 = join(dir, 'out2')
  mkdirSync(out2)
  symlinkSync(victim, join(out2, 'd'))
  await refused(sb.files.download('/t', out2), ErrorCodes.INVALID_ARGUMENT, 'localPath')
  assert.equal(readdirNames(victim), [])
}))

ctest('a tree download of a file that reads short or cannot be read ends that download naming path; the cluster goes on (was: the node process ended)', timed(90_000, async (defer) => {
  const { sb, dir } = await cluster(defer)
  // sysfs files say 4096 bytes and read fewer; some cannot be read at all (write-only).
  const short = await sb.files.download('/sys/kernel/mm/transparent_hugepage', join(dir, 'thp')).then(() => undefined, (e: unknown) => e as WarrenError)
  assert.ok(short !== undefined && short.code === ErrorCodes.INVALID_ARGUMENT, String(short))
  assert.is(short.details?.field, 'path')
  // A file truncated by the sandbox's own code while the trainer downloads its directory.
  await sb.exec(['sh', '-c', 'mkdir -p /results && head -c 60000000 /dev/zero > /results/log.bin'])
  const cut = sb.exec(['sh', '-c', 'sleep 0.2; : > /results/log.bin'])
  const truncated = await sb.files.download('/results', join(dir, 'results')).then(() => undefined, (e: unknown) => e as WarrenError)
  await cut
  if (truncated !== undefined) assert.is(truncated.details?.field, 'path', String(truncated))
  // The node is alive and serves the next download.
  assert.is((await sb.exec(['echo', 'alive'])).stdout, 'alive\n')
  await sb.exec(['sh', '-c', 'mkdir -p /ok && echo fine > /ok/f'])
  await sb.files.download('/ok', join(dir, 'ok'))
  assert.is(readFileSync(join(dir, 'ok', 'f'), 'utf8'), 'fine\n')
}))

ctest('an upload of a tree the sandbox has no room for rejects with its refusal; the client process goes on (was: an uncaught error ended it)', timed(90_000, async (defer) => {
  const { client, dir } = await cluster(defer)
  const small = await client.create({ backend: 'container', limits: { memoryMiB: 256, cpus: 1, diskMiB: 16 } })
  defer(() => small.kill())
  const tree = join(dir, 'big-tree')
  mkdirSync(join(tree, 'sub'), { recursive: true })
  writeFileSync(join(tree, 'a.txt'), 'a')
  writeFileSync(join(tree, 'sub', 'big.bin'), Buffer.alloc(40 * MiB, 7))
  writeFileSync(join(tree, 'z.txt'), 'z')
  const err = await small.files.upload(tree, '/repo').then(() => undefined, (e: unknown) => e as WarrenError)
  assert.ok(err !== undefined && typeof err.code === 'string' && err.code.startsWith('WARREN_ERR_'), String(err))
  // Still here: the sandbox answers.
  assert.is((await small.exec(['echo', 'alive'])).stdout, 'alive\n')
}))

ctest('a tar upload cannot write through a symlink it made, nor climb out with ..', timed(60_000, async (defer) => {
  const { sb, client } = await cluster(defer)
  const { pack } = await import('tar-stream')
  const tarOf = async (entries: Array<{ name: string, type?: 'file' | 'symlink' | 'directory', linkname?: string, body?: string }>): Promise<Buffer> => {
    const p = pack()
    for (const e of entries) {
      if (e.type === 'symlink') p.entry({ name: e.name, type: 'symlink', linkname: e.linkname! })
      else if (e.type === 'directory') p.entry({ name: e.name, type: 'directory' })
      else p.entry({ name: e.name }, e.body ?? '')
    }
    p.finalize()
    const parts: Buffer[] = []
    for await (const b of p as unknown as AsyncIterable<Buffer>) parts.push(b)
    return Buffer.concat(parts)
  }
  const send = async (tar: Buffer): Promise<unknown> => {
    const upload = `t${Math.random().toString(36).slice(2)}`
    const req = (r: Record<string, unknown>): Promise<unknown> => raw(client, sb.id, r)
    await req({ op: 'write-begin', upload, path: '/dest', format: 'tar' })
    await req({ op: 'write-chunk', upload, offset: 0, data: tar })
    return await req({ op: 'write-end', upload, size: tar.length })
  }
  await sb.exec(['sh', '-c', 'mkdir -p /outside && echo keep > /outside/f'])
  await refused(send(await tarOf([{ name: 'l', type: 'symlink', linkname: '/outside' }, { name: 'l/f', body: 'overwritten' }])), ErrorCodes.INVALID_ARGUMENT, 'data')
  await refused(send(await tarOf([{ name: '../outside/f', body: 'overwritten' }])), ErrorCodes.INVALID_ARGUMENT, 'data')
  await refused(send(await tarOf([{ name: 'x', type: 'symlink', linkname: '/outside/f' }, { name: 'x', body: 'overwritten' }])), ErrorCodes.INVALID_ARGUMENT, 'data')
  assert.is(await sb.files.read('/outside/f', { format: 'text' }), 'keep\n')
}))

ctest('another tenant\'s sandbox id answers NOT_FOUND for every file operation; the function backend answers UNSUPPORTED', timed(60_000, async (defer) => {
  const { sb, other, client } = await cluster(defer)
  await sb.files.write('/mine', 'secret')
  const theirs = await other.attach(sb.id).catch((e: unknown) => e)
  assert.ok(isWarrenError(theirs, ErrorCodes.NOT_FOUND), String(theirs))
  for (const r of [
    { op: 'read', path: '/mine', offset: 0, length: 10 }, { op: 'stat', path: '/mine' }, { op: 'list', path: '/' }, { op: 'remove', path: '/mine' },
    { op: 'write-begin', upload: 'x1', path: '/mine' }, { op: 'tar-begin', download: 'd1', path: '/' }, { op: 'rename', path: '/mine', to: '/m2' }
  ]) await refused(raw(other, sb.id, r), ErrorCodes.NOT_FOUND)
  assert.is(await sb.files.read('/mine', { format: 'text' }), 'secret')

  const fn = await client.create({ backend: 'function' })
  defer(() => fn.kill())
  for (const call of [
    () => fn.files.write('/x', 'data'), () => fn.files.read('/x'), () => fn.files.list('/'), () => fn.files.stat('/'), () => fn.files.exists('/'),
    () => fn.files.mkdir('/d'), () => fn.files.remove('/x'), () => fn.files.rename('/x', '/y'), () => fn.files.download('/', '/nonexistent-local')
  ]) await refused(call(), ErrorCodes.UNSUPPORTED)
}))

ctest('a socket killed mid-upload and mid-download: both go on after the reconnect and arrive byte-exact', timed(120_000, async (defer) => {
  const { sb, client } = await cluster(defer)
  const data = randomBytes(24 * MiB)
  async function * cutting (): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < data.length; at += MiB) {
      if (at === 8 * MiB) client.link.socket?.terminate() // the TCP connection dies; chunks in flight are sent again
      yield data.subarray(at, at + MiB)
    }
  }
  const info = await sb.files.write('/r/f', cutting())
  assert.is(info.sha256, sha(data))
  assert.is((await sb.exec(['sha256sum', '/r/f'])).stdout, `${sha(data)}  /r/f\n`)
  const hash = createHash('sha256')
  let bytes = 0
  let cut = false
  for await (const chunk of sb.files.readStream('/r/f') as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk)
    bytes += chunk.byteLength
    if (!cut && bytes > 8 * MiB) { cut = true; client.link.socket?.terminate() }
  }
  assert.ok(cut)
  assert.is(bytes, data.length)
  assert.is(hash.digest('hex'), sha(data))
}))

ctest('a connection may have only so many file chunks in flight: more are refused OVERLOADED, with a retry hint', timed(60_000, async (defer) => {
  const { sb, client } = await cluster(defer)
  await sb.files.write('/o/f', randomBytes(2 * MiB))
  const reads = Array.from({ length: FilesDefaults.maxInflightChunks * 3 }, () => raw(client, sb.id, { op: 'read', path: '/o/f', offset: 0, length: 900 * 1024 }).then(() => 'ok', (e: unknown) => e))
  const outcomes = await Promise.all(reads)
  const overloaded = outcomes.filter((o) => isWarrenError(o, ErrorCodes.OVERLOADED))
  assert.ok(overloaded.length > 0, 'some were refused')
  assert.ok(outcomes.filter((o) => o === 'ok').length >= FilesDefaults.maxInflightChunks, 'the bound were served')
  assert.ok(overloaded.every((o) => typeof (o.details as { retryAfterMs?: unknown }).retryAfterMs === 'number'))
}))

function readdirNames (dir: string): string[] {
  return readdirSync(dir)
}

/** A files request as it goes on the wire, past the SDK's own checks: what the node itself refuses. */
function raw (client: Client, id: string, body: Record<string, unknown>): Promise<unknown> {
  return client.request({ type: 'files', id, ...body } as unknown as Parameters<Client['request']>[0])
}

test.run()
