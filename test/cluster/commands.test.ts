import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError, type ErrorCode } from '../../src/errors.js'
import type { ExecHandle } from '../../src/sdk/index.js'
import { containerSkip, tenantCluster } from '../security/support.js'
import { timed } from '../support/index.js'

if (containerSkip !== undefined) console.log(`command tests skipped: ${containerSkip}`)
const ctest = containerSkip === undefined ? test : test.skip

function refusedOn (err: unknown, code: ErrorCode, field: string): boolean {
  return isWarrenError(err, code) && err.details?.field === field
}

/** Reads a handle's output until it holds `want`; returns all read so far. */
async function readUntil (it: AsyncIterator<{ data: Uint8Array }>, seen: { text: string }, want: string | RegExp): Promise<string> {
  const has = (): boolean => typeof want === 'string' ? seen.text.includes(want) : want.test(seen.text)
  while (!has()) {
    const next = await it.next()
    if (next.done === true) throw new Error(`ended before ${String(want)}: ${JSON.stringify(seen.text)}`)
    seen.text += new TextDecoder().decode(next.value.data)
  }
  return seen.text
}

ctest('exec runs in cwd as user: a name from /etc/passwd (its home too), a uid, uid:gid; a string runs through /bin/sh -c', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'cmd-id')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const who = 'pwd; id -u; id -g; echo $HOME'
  assert.is((await sb.exec(who, { cwd: '/tmp', user: 'sandbox' })).stdout, '/tmp\n1000\n1000\n/home/sandbox\n')
  assert.is((await sb.exec(who, { cwd: '/tmp', user: 65534 })).stdout, '/tmp\n65534\n65534\n/nonexistent\n')
  assert.is((await sb.exec(['sh', '-c', 'id -u; id -g'], { user: '1234:55' })).stdout, '1234\n55\n')
  assert.is((await sb.exec(who)).stdout, '/\n0\n0\n/root\n', 'root in / by default')
  const piped = await sb.exec('echo one two three | wc -w; exit 3')
  assert.is(piped.stdout.trim(), '3')
  assert.is(piped.exitCode, 3)
  // A file written as the user is the user's.
  await sb.exec('touch /tmp/mine', { user: 'sandbox' })
  assert.is((await sb.exec(['stat', '-c', '%u:%g', '/tmp/mine'])).stdout, '1000:1000\n')
}))

ctest('exec refuses a bad cwd or user with an error naming the field, and the function backend refuses both as UNSUPPORTED', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'cmd-bad')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const fail = async (p: Promise<unknown>): Promise<unknown> => await p.then(() => new Error('resolved'), (e: unknown) => e)
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '/no/such/dir' })), ErrorCodes.NOT_FOUND, 'cwd'), 'missing cwd')
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '/etc/passwd' })), ErrorCodes.NOT_FOUND, 'cwd'), 'cwd that is a file')
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '/root', user: 'sandbox' })), ErrorCodes.FORBIDDEN, 'cwd'), 'a cwd the user may not enter')
  assert.ok(refusedOn(await fail(sb.exec('true', { user: 'nosuchuser' })), ErrorCodes.NOT_FOUND, 'user'), 'unknown user')
  assert.ok(refusedOn(await fail(sb.exec('true', { user: 'a b;rm' })), ErrorCodes.INVALID_ARGUMENT, 'user'), 'malformed user')
  assert.ok(refusedOn(await fail(sb.exec('true', { user: '4294967295' })), ErrorCodes.INVALID_ARGUMENT, 'user'), 'uid out of range')
  // On the wire: bounds and bad bytes.
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '/tmp\0x' })), ErrorCodes.INVALID_ARGUMENT, 'opts.cwd'), 'NUL in cwd')
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '/'.repeat(5000) })), ErrorCodes.INVALID_ARGUMENT, 'opts.cwd'), 'cwd too long')
  assert.ok(refusedOn(await fail(sb.exec('true', { user: 'x'.repeat(300) })), ErrorCodes.INVALID_ARGUMENT, 'opts.user'), 'user too long')
  assert.ok(refusedOn(await fail(sb.exec('true', { cwd: '' })), ErrorCodes.INVALID_ARGUMENT, 'opts.cwd'), 'empty cwd')
  // A /etc/passwd the tenant made huge costs the node a bounded read, and a name past it is not found.
  await sb.exec(`yes 'filler:x:5:5::/:/bin/sh' | head -c 3000000 > /tmp/p; echo 'late:x:77:77::/:/bin/sh' >> /tmp/p; cat /tmp/p >> /etc/passwd`)
  assert.ok(refusedOn(await fail(sb.exec('true', { user: 'late' })), ErrorCodes.NOT_FOUND, 'user'), 'beyond the bounded read')
  assert.is((await sb.exec('id -u', { user: 'sandbox' })).stdout, '1000\n', 'names early in the file still resolve')
  // The sandbox goes on as before.
  assert.is((await sb.exec('echo fine')).stdout, 'fine\n')
  const fn = await client.create({ backend: 'function' })
  defer(() => fn.kill())
  assert.ok(refusedOn(await fail(fn.exec(['js', '1'], { cwd: '/tmp' })), ErrorCodes.UNSUPPORTED, 'cwd'))
  assert.ok(refusedOn(await fail(fn.exec(['js', '1'], { user: 'nobody' })), ErrorCodes.UNSUPPORTED, 'user'))
  assert.ok(refusedOn(await fail(fn.spawn(['js', '1'], { pty: { cols: 80, rows: 24 } }).wait()), ErrorCodes.UNSUPPORTED, 'pty'))
}))

ctest('openStdin: the first write and the first closeStdin cost what later ones do, not the 2 s read wait', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'cmd-stdin')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  await sb.exec('true') // the sandbox is warm
  // The command prints nothing until it has read: the old exec answer waited the whole read wait
  // (2,000 ms) for output before the first write could go.
  for (let i = 0; i < 3; i++) {
    const h = sb.spawn(['sh', '-c', 'read line; echo "got $line"'], { openStdin: true })
    const t0 = Date.now()
    await h.write('x\n')
    const first = Date.now() - t0
    assert.ok(first < 1000, `first write took ${first} ms`)
    let out = ''
    for await (const c of h) out += new TextDecoder().decode(c.data)
    assert.is(out, 'got x\n')
    const cat = sb.spawn(['cat'], { openStdin: true })
    const t1 = Date.now()
    await cat.closeStdin()
    assert.ok(Date.now() - t1 < 1000, `first closeStdin took ${Date.now() - t1} ms`)
    assert.is((await cat.wait()).exitCode, 0)
  }
}))

ctest('pty: a spawned command has a terminal (tty names /dev/pts/N), stty size follows the size and a resize', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'cmd-pty')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const once = sb.spawn('tty; stty size; echo err >&2', { pty: { cols: 100, rows: 30 } })
  let text = ''
  for await (const c of once) { assert.is(c.stream, 'stdout', 'a terminal has one stream'); text += new TextDecoder().decode(c.data) }
  assert.match(text, /^\/dev\/pts\/\d+\r\n30 100\r\nerr\r\n$/)
  assert.is((await once.wait()).exitCode, 0)

  const sh: ExecHandle = sb.spawn(['sh'], { pty: { cols: 80, rows: 24 }, openStdin: true })
  const it = sh[Symbol.asyncIterator]()
  const seen = { text: '' }
  await sh.write('stty size\n')
  await readUntil(it, seen, '24 80')
  await sh.resize({ cols: 132, rows: 43 })
  await sh.write('stty size\n')
  await readUntil(it, seen, '43 132')
  // A resize reaches the foreground program as SIGWINCH.
  await sh.write("trap 'echo winched' WINCH; sleep 0.2; sleep 0.2; sleep 0.2; echo slept\n")
  await new Promise((resolve) => setTimeout(resolve, 100))
  await sh.resize({ cols: 90, rows: 20 })
  await readUntil(it, seen, /winched[\s\S]*slept/)
  // Bad sizes are refused on the wire.
  for (const size of [{ cols: 0, rows: 10 }, { cols: 10, rows: 100_000 }, { cols: 1.5, rows: 10 }]) {
    const err = await sh.resize(size).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), `${JSON.stringify(size)} refused`)
  }
  for (const pty of [{ cols: 0, rows: 5 }, { cols: 5, rows: 1001 }, { cols: 5 }]) {
    const err = await sb.spawn('true', { pty: pty as { cols: number, rows: number } }).wait().catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) && String(err.details?.field).startsWith('opts.pty.'), `${JSON.stringify(pty)} refused: ${String(err)}`)
  }
  const plain = sb.spawn('sleep 5')
  assert.ok(refusedOn(await plain.resize({ cols: 10, rows: 10 }).catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT, 'pty'), 'resize without a pty')
  await plain.kill()
  // closeStdin types ^D: the shell reads the end of its input and exits.
  await sh.closeStdin()
  assert.is((await sh.wait()).exitCode, 0)
}))

ctest('an exec sent again with the id of one that ran and was read is refused naming execId, not run a second time', timed(60_000, async (defer) => {
  // Found on this session's changes: starts the SDK sent again (the first copies waited queued
  // behind a tenant's rate) ran once each after the first had been read: one command ran 4 times.
  const { client } = await tenantCluster(defer, 'cmd-dup')
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const start = { type: 'exec', id: sb.id, execId: 'dup-1', argv: ['sh', '-c', 'echo ran >> /tmp/ledger'] } as const
  // The start answers with the first page; read on to the end.
  let page = await client.request<{ nextSeq: number, result?: unknown }>(start as never)
  while (page.result === undefined) page = await client.request({ type: 'read', id: sb.id, execId: 'dup-1', fromSeq: page.nextSeq } as never)
  const again = await client.request(start as never).then(() => undefined, (e: unknown) => e)
  assert.ok(refusedOn(again, ErrorCodes.INVALID_ARGUMENT, 'execId'), String(again))
  assert.is((await sb.exec('wc -l < /tmp/ledger')).stdout.trim(), '1', 'it ran once')
}))

test.run()
