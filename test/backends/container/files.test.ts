/**
 * File operations through the agent: read, write (creating parents), list, stat, remove, their
 * size limits, and the files that must never block or escape (FIFOs, devices, `..`).
 */
import { randomBytes } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits } from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError, type ErrorCode } from '../../../src/errors.js'
import { timed } from '../../support/index.js'
import { bytes, registerLeftoverCheck, sandboxTest, sh, startSandbox, text } from './helpers.js'

async function rejects (p: Promise<unknown>, code: ErrorCode): Promise<Error> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code), `expected ${code}, got ${String(err)}`)
  return err as Error
}

sandboxTest('write creates parents; read, stat and list see it; the shell does too', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await client.files.write('/task/a/b/c.txt', bytes('hello'), { mode: 0o600 })
  assert.is(text(await client.files.read('/task/a/b/c.txt')), 'hello')
  assert.is(await sh(client, 'cat /task/a/b/c.txt; stat -c %a /task/a/b/c.txt'), 'hello600\n')
  const st = await client.files.stat('/task/a/b/c.txt')
  assert.equal({ type: st.type, size: st.size, mode: st.mode, uid: st.uid }, { type: 'file', size: 5, mode: 0o600, uid: 0 })
  assert.ok(st.mtimeMs > 0)
  await client.files.write('/task/a/b/c.txt', bytes(' world'), { append: true })
  assert.is(text(await client.files.read('/task/a/b/c.txt')), 'hello world')
  await client.files.write('/task/a/b/c.txt', bytes('short'))
  assert.is(text(await client.files.read('/task/a/b/c.txt')), 'short')
  await sh(client, 'ln -s b /task/a/link; mkdir /task/a/d')
  const { entries, truncated } = await client.files.list('/task/a')
  assert.is(truncated, false)
  assert.equal(entries.map((e) => [e.name, e.type]).sort(), [['b', 'dir'], ['d', 'dir'], ['link', 'symlink']])
  const link = await client.files.stat('/task/a/link')
  assert.equal([link.type, link.target], ['symlink', 'b'])
  assert.is((await client.files.stat('/task/a/link', { follow: true })).type, 'dir')
  await rejects(client.files.write('/nowhere/x', bytes('x'), { mkdirs: false }), ErrorCodes.NOT_FOUND)
}))

sandboxTest('reads by range; big files must be read in ranges; writes over the limit are refused', timed(20_000, async (defer) => {
  const { client } = await startSandbox(defer)
  const data = randomBytes(AgentLimits.maxFileBytes)
  await client.files.write('/big', data)
  assert.ok(Buffer.from(await client.files.read('/big')).equals(data), 'a file at the limit round-trips')
  assert.ok(Buffer.from(await client.files.read('/big', { offset: 1000, length: 10 })).equals(data.subarray(1000, 1010)))
  assert.is((await client.files.read('/big', { offset: data.length + 5 })).length, 0)
  await sh(client, 'echo more >> /big')
  await rejects(client.files.read('/big'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.read('/big', { length: AgentLimits.maxFileBytes + 1 }), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.write('/too-big', new Uint8Array(AgentLimits.maxFileBytes + 1)), ErrorCodes.INVALID_ARGUMENT)
  // Files of /proc say size 0 and still read whole.
  assert.match(text(await client.files.read('/proc/self/status')), /^Name:/)
}))

sandboxTest('FIFOs, devices and directories are refused without blocking the agent', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await sh(client, 'mkfifo /tmp/fifo')
  await rejects(client.files.read('/tmp/fifo'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.write('/tmp/fifo', bytes('x')), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.read('/dev/zero'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.read('/tmp'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.list('/etc/passwd'), ErrorCodes.NOT_FOUND)
  await rejects(client.files.read('/no/such/file'), ErrorCodes.NOT_FOUND)
  await rejects(client.files.write('/proc/sys/kernel/hostname', bytes('x')), ErrorCodes.FORBIDDEN)
  await rejects(client.files.read(''), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.read('/a\0b'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.read('/' + 'x'.repeat(AgentLimits.maxPath + 1)), ErrorCodes.INVALID_ARGUMENT)
  // Still answering.
  assert.equal(await client.ping(), { version: AgentLimits.version, pid: 1 })
}))

sandboxTest('remove: files, links (not their targets), empty dirs, and trees when recursive', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await sh(client, 'mkdir -p /t/a/b /keep && echo k > /keep/file && ln -s /keep /t/a/b/link && echo x > /t/a/f && mkdir /t/empty')
  await client.files.remove('/t/empty')
  await rejects(client.files.remove('/t/a'), ErrorCodes.INVALID_ARGUMENT)
  await client.files.remove('/t', { recursive: true })
  await rejects(client.files.stat('/t'), ErrorCodes.NOT_FOUND)
  assert.is(text(await client.files.read('/keep/file')), 'k\n', 'a symlink in a removed tree does not take its target along')
  await rejects(client.files.remove('/t'), ErrorCodes.NOT_FOUND)
  await rejects(client.files.remove('/', { recursive: true }), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.remove('/../..', { recursive: true }), ErrorCodes.INVALID_ARGUMENT)
  // A recursive remove does not cross into other mounts.
  await rejects(client.files.remove('/proc/self', { recursive: true }), ErrorCodes.FORBIDDEN)
  assert.match(await sh(client, 'ls /bin | head -3'), /\w/)
}))

sandboxTest('a listing is capped at the entry limit and says truncated', timed(30_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await sh(client, `mkdir /many && cd /many && i=0; while [ $i -lt ${AgentLimits.maxListEntries + 5} ]; do : > f$i; i=$((i+1)); done`)
  const { entries, truncated } = await client.files.list('/many')
  assert.is(entries.length, AgentLimits.maxListEntries)
  assert.is(truncated, true)
}))

sandboxTest('write at an offset lands there and truncates nothing; sent twice it is the same file', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await client.files.write('/w/f', bytes('aaaaaaaa'))
  await client.files.write('/w/f', bytes('BB'), { offset: 2 })
  await client.files.write('/w/f', bytes('BB'), { offset: 2 })
  assert.is(text(await client.files.read('/w/f')), 'aaBBaaaa')
  await client.files.write('/w/f', bytes('z'), { offset: 10 })
  assert.equal([...await client.files.read('/w/f', { offset: 8 })], [0, 0, 0x7a], 'a gap reads as zeros')
  await rejects(client.files.write('/w/f', bytes('x'), { offset: 1, append: true }), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.write('/w/f', bytes('x'), { offset: 2 ** 64 }), ErrorCodes.MALFORMED_FRAME)
}))

sandboxTest('mkdir (with parents or not), rename and symlink do what their names say', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await client.files.mkdir('/m/a/b', { parents: true, mode: 0o750 })
  const st = await client.files.stat('/m/a/b')
  assert.is(st.type, 'dir')
  assert.is(st.mode, 0o750)
  await client.files.mkdir('/m/a/b', { parents: true })
  await rejects(client.files.mkdir('/m/a/b'), ErrorCodes.INVALID_ARGUMENT)
  await rejects(client.files.mkdir('/nope/x'), ErrorCodes.NOT_FOUND)
  await client.files.write('/m/a/f', bytes('one'))
  await client.files.rename('/m/a/f', '/m/a/b/g')
  assert.is(text(await client.files.read('/m/a/b/g')), 'one')
  await rejects(client.files.stat('/m/a/f'), ErrorCodes.NOT_FOUND)
  await rejects(client.files.rename('/m/missing', '/m/x'), ErrorCodes.NOT_FOUND)
  await client.files.symlink('/m/l/link', '../a/b/g')
  const link = await client.files.stat('/m/l/link')
  assert.is(link.type, 'symlink')
  assert.is(link.target, '../a/b/g')
  assert.is(text(await client.files.read('/m/l/link')), 'one')
  await rejects(client.files.symlink('/m/l/link', '/x'), ErrorCodes.INVALID_ARGUMENT)
  // Paths resolve inside the sandbox: climbing out of its root ends at its root.
  await client.files.symlink('/m/up', '../../../../etc/shadow-not-here')
  await rejects(client.files.read('/m/up'), ErrorCodes.NOT_FOUND)
}))

registerLeftoverCheck()

sandboxTest('a file the kernel refuses to read (EIO) is an error a caller can act on, not INTERNAL', timed(10_000, async (defer) => {
  const { client } = await startSandbox(defer)
  // Reading /proc/self/mem from offset 0 is EIO: nothing is mapped at address 0.
  const err = await client.files.read('/proc/self/mem', { offset: 0, length: 16 }).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err), String(err))
  assert.is.not((err as { code: string }).code, ErrorCodes.INTERNAL, String(err))
  assert.is((err as { code: string }).code, ErrorCodes.BACKEND_UNAVAILABLE, String(err))
}))

test.run()
