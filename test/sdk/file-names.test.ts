/**
 * File names that are not UTF-8, through the public SDK against a real cluster, in a container
 * and in a microVM. Before, one such name failed a whole tree download (NOT_FOUND), and such a
 * file could not be read, stat'ed or renamed: names crossed every wire as strings, and a name's
 * bytes were lost in the decoding. Now a listed name (escaped as Python's surrogateescape does)
 * is a path that works, and trees move both ways with the exact bytes of every name.
 */
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { microvmUnavailable } from '../../src/backends/microvm/index.js'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

// The guest kernel is kept between runs, shared with the microvm tests.
const GUEST_DIR = '/var/tmp/warren-test-guest'
process.env.WARREN_GUEST_DIR = GUEST_DIR
const why = containerUnavailable()
if (why !== undefined) console.log(`file name tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip
const vmWhy = why ?? microvmUnavailable(GUEST_DIR)
if (vmWhy !== undefined && why === undefined) console.log(`microvm file name test skipped: ${vmWhy}`)
const vtest = vmWhy === undefined ? test : test.skip

/** `caf\xe9`, a directory `d\xff` and a link to the first, as the sandbox's own shell makes them. */
const MAKE_TREE = 'mkdir -p /t && printf x > "/t/caf$(printf \'\\351\')" && mkdir "/t/d$(printf \'\\377\')" && ' +
  'printf y > "/t/d$(printf \'\\377\')/in" && ln -s "caf$(printf \'\\351\')" /t/link && printf u > /t/é.txt'
/** The names of a directory as bytes, hex, sorted: what the sandbox's kernel holds. */
const hexNames = (dir: string): string => `for f in ${dir}/*; do printf '%s\\n' "\${f##*/}"; done | od -An -tx1 | tr -d ' \\n'; echo`

async function cluster (defer: (fn: () => unknown) => void, microvm: boolean): Promise<{ dir: string, client: Client }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-names-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'names', dataDir: join(dir, 'node'), containerPool: { max: 0 }, ...(microvm ? { microvm: { guestDir: GUEST_DIR } } : {}) })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]), requestTimeoutMs: 120_000 })
  defer(() => client.close())
  return { dir, client }
}

/** Every file call on names that are not UTF-8, checked against what the sandbox's shell sees. */
async function exerciseNames (sb: Sandbox, dir: string): Promise<void> {
  const made = await sb.exec(MAKE_TREE)
  assert.is(made.exitCode, 0, made.stderr)

  const listed = await sb.files.list('/t')
  assert.equal(listed.map((e) => e.name).sort(), ['caf\udce9', 'd\udcff', 'link', 'é.txt'])
  assert.is(listed.find((e) => e.name === 'caf\udce9')?.path, '/t/caf\udce9')
  assert.is((await sb.files.stat('/t/link')).target, 'caf\udce9')
  assert.is(await sb.files.read('/t/caf\udce9', { format: 'text' }), 'x')
  assert.is((await sb.files.stat('/t/d\udcff')).type, 'dir')

  await sb.files.write('/t/new\udcfe', 'z')
  assert.is((await sb.exec('cat "/t/new$(printf \'\\376\')"')).stdout, 'z')
  await sb.files.rename('/t/new\udcfe', '/t/re\udcfd')
  assert.is((await sb.exec('cat "/t/re$(printf \'\\375\')"')).stdout, 'z')
  // A name of NAME_MAX bytes is written too (its upload's temporary name had been past it).
  await sb.files.write(`/t/${'n'.repeat(254)}\udcfb`, 'long')
  assert.is((await sb.exec(`cat /t/${'n'.repeat(254)}*`)).stdout, 'long')
  await sb.files.remove(`/t/${'n'.repeat(254)}\udcfb`)
  await sb.files.mkdir('/t/m\udcfc/n', { parents: true })
  assert.is((await sb.exec('test -d "/t/m$(printf \'\\374\')/n" && echo yes')).stdout, 'yes\n')

  // A missing one is NOT_FOUND, its message well-formed with the byte shown.
  const missing = await sb.files.stat('/t/gone\udcff').catch((e: unknown) => e)
  assert.ok(isWarrenError(missing, ErrorCodes.NOT_FOUND), String(missing))
  assert.match(missing.message, /gone\\xff/)

  // Down: the whole tree, every name's bytes exact on the local disk.
  const down = join(dir, 'down')
  await sb.files.download('/t', down)
  const local = readdirSync(down, { encoding: 'buffer' }).map((b) => b.toString('hex')).sort()
  const expected = ['caf\xe9', 'd\xff', 'link', 're\xfd', 'm\xfc'].map((n) => Buffer.from(n, 'latin1').toString('hex')).concat(Buffer.from('é.txt').toString('hex')).sort()
  assert.equal(local, expected)
  assert.is(readFileSync(Buffer.concat([Buffer.from(join(down, 'caf')), Buffer.of(0xe9)])).toString(), 'x')
  assert.is(readFileSync(Buffer.concat([Buffer.from(join(down, 'd')), Buffer.of(0xff), Buffer.from('/in')])).toString(), 'y')
  assert.ok(readlinkSync(join(down, 'link'), { encoding: 'buffer' }).equals(Buffer.from('caf\xe9', 'latin1')), 'the link\'s target bytes')

  // Up: a local tree holding such names (and a link to one) arrives with the same bytes.
  const up = join(dir, 'up')
  mkdirSync(up)
  writeFileSync(Buffer.concat([Buffer.from(join(up, 'na')), Buffer.of(0xef), Buffer.from('ve')]), 'naive')
  mkdirSync(Buffer.concat([Buffer.from(join(up, 'sub')), Buffer.of(0x80)]))
  writeFileSync(Buffer.concat([Buffer.from(join(up, 'sub')), Buffer.of(0x80), Buffer.from('/f')]), 'deep')
  symlinkSync(Buffer.concat([Buffer.from('na'), Buffer.of(0xef), Buffer.from('ve')]), join(up, 'ln'))
  assert.ok(lstatSync(join(up, 'ln')).isSymbolicLink())
  await sb.files.upload(up, '/u')
  assert.is((await sb.exec(hexNames('/u'))).stdout, Buffer.from('ln\nna\xefve\nsub\x80\n', 'latin1').toString('hex') + '\n')
  assert.is((await sb.exec('cat "/u/na$(printf \'\\357\')ve" "/u/sub$(printf \'\\200\')/f"; readlink /u/ln | od -An -tx1 | tr -d " \\n"')).stdout, 'naivedeep6e61ef76650a', 'the files and the link\'s target')

  await sb.files.remove('/t/d\udcff', { recursive: true })
  assert.is((await sb.exec('ls /t | grep -c "^d" || true')).stdout, '0\n')
}

ctest('a container: names that are not UTF-8 list, stat, read, write, rename, download and upload with their bytes; the trajectory replays them', timed(120_000, async (defer) => {
  const { dir, client } = await cluster(defer, false)
  const sb = await client.create({ backend: 'container', limits: { memoryMiB: 256, diskMiB: 64 } })
  defer(() => sb.kill())
  await exerciseNames(sb, dir)

  // The steps keep the paths' bytes (a bin on the wire), so a replay makes the same files.
  const writes = []
  for await (const step of client.steps(sb.id)) if (step.kind === 'write' || step.kind === 'rename') writes.push(step)
  assert.equal(writes.map((s) => s.kind === 'write' ? [...Buffer.from(s.path as Uint8Array)] : [...Buffer.from(s.to as Uint8Array)]), [
    [...Buffer.from('/t/new\xfe', 'latin1')], [...Buffer.from('/t/re\xfd', 'latin1')], [...Buffer.from(`/t/${'n'.repeat(254)}\xfb`, 'latin1')]
  ])
  const replayed = await client.replay(sb.id)
  defer(() => replayed.sandbox.kill())
  assert.equal([replayed.divergedAt, replayed.skipped], [null, []], JSON.stringify({ ...replayed, sandbox: replayed.sandbox.id }))
  assert.is((await replayed.sandbox.exec('cat "/t/re$(printf \'\\375\')" "/u/na$(printf \'\\357\')ve"')).stdout, 'znaive')
}))

vtest('a microVM: the same names through its agent over virtio-serial', timed(180_000, async (defer) => {
  const { dir, client } = await cluster(defer, true)
  const sb = await client.create({ backend: 'microvm', limits: { cpus: 1, memoryMiB: 192, diskMiB: 32 } })
  defer(() => sb.kill())
  await exerciseNames(sb, dir)
}))

test.run()
