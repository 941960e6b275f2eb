import { spawn, type ChildProcess } from 'node:child_process'
import { open, readdir, readFile, readlink, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isWarrenError, type WarrenError } from '../../../src/errors.js'
import { run } from '../../../src/images/index.js'
import { mountLayerFs, type LayerFsErrorContext } from '../../../src/images/fuse/index.js'
import { timed, waitFor } from '../../support/index.js'
import { memoryRead, mountMemory, rootTest, seededBytes, sha256, skipReason, SUBTYPE, tempDir, testMounts } from './helpers.js'

const KiB = 1024
const MiB = 1024 * KiB

/** Resolves when `code` is thrown by `p`; fails the test otherwise. */
async function rejectsWith (p: Promise<unknown>, code: string): Promise<void> {
  try {
    await p
  } catch (err) {
    assert.is((err as NodeJS.ErrnoException).code, code)
    return
  }
  assert.unreachable(`expected ${code}`)
}

/** An onError that keeps what it is told. */
function errorLog (): { errors: Array<{ err: WarrenError, context: LayerFsErrorContext }>, onError: (err: WarrenError, context: LayerFsErrorContext) => void } {
  const errors: Array<{ err: WarrenError, context: LayerFsErrorContext }> = []
  return { errors, onError: (err, context) => errors.push({ err, context }) }
}

rootTest('files read back byte for byte: empty, odd sizes around 4 KiB, and a multi-MiB file', timed(30_000, async (defer) => {
  const files = new Map<string, Uint8Array>([
    ['empty', Buffer.alloc(0)],
    ['one', Buffer.from('x')],
    ['page-1', seededBytes(4 * KiB - 1, 1)],
    ['page', seededBytes(4 * KiB, 2)],
    ['page+1', seededBytes(4 * KiB + 1, 3)],
    ['odd', seededBytes(123_457, 4)],
    ['big', seededBytes(7 * MiB + 4321, 5)]
  ])
  const fs = await mountMemory(defer, tempDir(defer), files)
  assert.ok(fs.protocol.minor >= 28, `protocol minor ${fs.protocol.minor}`)
  for (const [name, data] of files) {
    const got = await readFile(join(fs.mountpoint, name))
    assert.is(got.length, data.byteLength, name)
    assert.ok(got.equals(data), `${name} differs`)
  }
  assert.is(sha256(await readFile(join(fs.mountpoint, 'big'))), sha256(files.get('big')!))
  const s = fs.stats()
  assert.ok(s.reads > 0 && s.readErrors === 0 && s.readTimeouts === 0, JSON.stringify(s))
}))

rootTest('stat shows each size and read-only mode; readdir lists exactly the files', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['sha256-aaaa.erofs', seededBytes(10_000, 6)], ['sha256-bbbb.erofs', seededBytes(1, 7)], ['c', Buffer.alloc(0)]])
  const fs = await mountMemory(defer, tempDir(defer), files)
  assert.equal((await readdir(fs.mountpoint)).sort(), [...files.keys()].sort())
  for (const [name, data] of files) {
    const s = await stat(join(fs.mountpoint, name))
    assert.ok(s.isFile(), name)
    assert.is(s.size, data.byteLength, name)
    assert.is(s.mode & 0o777, 0o444, name)
  }
  const root = await stat(fs.mountpoint)
  assert.ok(root.isDirectory())
  await rejectsWith(stat(join(fs.mountpoint, 'missing')), 'ENOENT')
  await rejectsWith(open(join(fs.mountpoint, 'c'), 'r+'), 'EROFS')
}))

rootTest('a file added to the list later is found: misses are not cached', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['first', Buffer.from('1')]])
  const fs = await mountMemory(defer, tempDir(defer), files)
  await rejectsWith(stat(join(fs.mountpoint, 'second')), 'ENOENT')
  files.set('second', Buffer.from('two'))
  assert.is((await readFile(join(fs.mountpoint, 'second'), 'utf8')), 'two')
}))

rootTest('files given as a lookup object; invalid entries are left out and reported once', timed(20_000, async (defer) => {
  const good = seededBytes(3000, 20)
  const log = errorLog()
  const entries = [{ name: 'good', size: good.length }, { name: 'a/b', size: 1 }, { name: '..', size: 1 }, { name: 'neg', size: -1 }]
  const fs = await mountMemory(defer, tempDir(defer), new Map([['good', good]]), {
    onError: log.onError,
    files: { get: (name) => entries.find((e) => e.name === name), list: () => entries }
  })
  assert.equal(await readdir(fs.mountpoint), ['good'])
  assert.equal(await readdir(fs.mountpoint), ['good'])
  await rejectsWith(stat(join(fs.mountpoint, 'neg')), 'ENOENT')
  assert.ok((await readFile(join(fs.mountpoint, 'good'))).equals(good))
  const reported = log.errors.map((e) => e.err.code)
  assert.is(reported.length, 3, JSON.stringify(log.errors.map((e) => e.err.message)))
  assert.ok(reported.every((c) => c === 'WARREN_ERR_INVALID_ARGUMENT'))
}))

rootTest('a mount that cannot happen fails with a coded error and leaves no mount or descriptor behind', timed(20_000, async (defer) => {
  const dir = tempDir(defer)
  const fuseFds = async (): Promise<number> => {
    let n = 0
    for (const fd of await readdir('/proc/self/fd')) {
      if (await readlink(`/proc/self/fd/${fd}`).catch(() => '') === '/dev/fuse') n++
    }
    return n
  }
  const before = await fuseFds()
  const files = [{ name: 'f', size: 1 }]
  const read = async (): Promise<Uint8Array> => Buffer.from('f')
  try {
    await mountLayerFs({ mountpoint: join(dir, 'missing'), files, read })
    assert.unreachable('mounted on a missing dir')
  } catch (err) {
    assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'), String(err))
  }
  await writeFile(join(dir, 'plain-file'), '')
  try {
    await mountLayerFs({ mountpoint: join(dir, 'plain-file'), subtype: SUBTYPE, files, read })
    assert.unreachable('mounted on a file')
  } catch (err) {
    assert.ok(isWarrenError(err, 'WARREN_ERR_INTERNAL'), String(err))
  }
  try {
    await mountLayerFs({ mountpoint: dir, files, read, maxPages: 0 })
    assert.unreachable('accepted maxPages 0')
  } catch (err) {
    assert.ok(isWarrenError(err, 'WARREN_ERR_INVALID_ARGUMENT'), String(err))
  }
  assert.is(await fuseFds(), before)
  assert.ok(!testMounts().some((m) => m.mountPoint.startsWith(dir)))
}))

rootTest('readers of different files are served at the same time (a read waits for the others to arrive)', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['a', seededBytes(MiB, 8)], ['b', seededBytes(MiB, 9)], ['c', seededBytes(MiB, 10)]])
  // Every read is held until reads of all three files are pending at once. A server that answered
  // one request at a time would never get there, and the test would time out.
  const waiting = new Set<string>()
  let openGate: () => void = () => undefined
  const gate = new Promise<void>((resolve) => { openGate = resolve })
  const serve = memoryRead(files)
  const fs = await mountMemory(defer, tempDir(defer), files, {
    read: async (name, offset, length, signal) => {
      waiting.add(name)
      if (waiting.size === files.size) openGate()
      await gate
      return await serve(name, offset, length, signal)
    }
  })
  const got = await Promise.all([...files.keys()].map((name) => readFile(join(fs.mountpoint, name))))
  ;[...files.values()].forEach((data, i) => assert.ok(got[i]!.equals(data)))
  assert.ok(fs.stats().maxInFlight >= 3, JSON.stringify(fs.stats()))
}))

rootTest('several readers of one multi-MiB file all get its bytes', timed(30_000, async (defer) => {
  const big = seededBytes(9 * MiB + 77, 11)
  const fs = await mountMemory(defer, tempDir(defer), new Map([['big', big]]))
  const got = await Promise.all([1, 2, 3, 4].map(() => readFile(join(fs.mountpoint, 'big'))))
  for (const g of got) assert.is(sha256(g), sha256(big))
}))

rootTest('a read callback that rejects gives the reader EIO; the next read works', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['flaky', seededBytes(300 * KiB, 12)], ['fine', seededBytes(5000, 13)]])
  const serve = memoryRead(files)
  let failing = true
  const log = errorLog()
  const fs = await mountMemory(defer, tempDir(defer), files, {
    onError: log.onError,
    read: async (name, offset, length, signal) => {
      if (failing && name === 'flaky') throw new Error('store unreachable')
      return await serve(name, offset, length, signal)
    }
  })
  await rejectsWith(readFile(join(fs.mountpoint, 'flaky')), 'EIO')
  assert.ok((await readFile(join(fs.mountpoint, 'fine'))).equals(files.get('fine')!), 'other files are served meanwhile')
  assert.ok(log.errors.length > 0)
  assert.is(log.errors[0]!.context.op, 'READ')
  assert.is(log.errors[0]!.context.name, 'flaky')
  assert.match(log.errors[0]!.err.message, /store unreachable/)
  failing = false
  assert.ok((await readFile(join(fs.mountpoint, 'flaky'))).equals(files.get('flaky')!), 'the same file reads once the store is back')
  assert.ok(fs.stats().readErrors > 0)
}))

rootTest('a callback answering the wrong number of bytes gives EIO, not a short file', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['short', seededBytes(10_000, 14)]])
  const log = errorLog()
  const fs = await mountMemory(defer, tempDir(defer), files, {
    onError: log.onError,
    read: async () => Buffer.alloc(10)
  })
  await rejectsWith(readFile(join(fs.mountpoint, 'short')), 'EIO')
  assert.match(log.errors[0]!.err.message, /returned 10 bytes/)
  assert.is((await stat(join(fs.mountpoint, 'short'))).size, 10_000, 'the size is unchanged')
}))

rootTest('a read slower than readTimeoutMs gives EIO and aborts its signal', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['slow', seededBytes(8192, 15)]])
  const log = errorLog()
  const signals: AbortSignal[] = []
  const fs = await mountMemory(defer, tempDir(defer), files, {
    readTimeoutMs: 200,
    onError: log.onError,
    read: (_name, _offset, _length, signal) => {
      signals.push(signal)
      return new Promise<Uint8Array>(() => undefined) // never answers
    }
  })
  await rejectsWith(readFile(join(fs.mountpoint, 'slow')), 'EIO')
  assert.ok(signals.length > 0 && signals.every((s) => s.aborted))
  assert.ok(isWarrenError(signals[0]!.reason, 'WARREN_ERR_TIMEOUT'))
  assert.ok(log.errors.some((e) => e.err.code === 'WARREN_ERR_TIMEOUT' && e.context.name === 'slow'))
  assert.ok(fs.stats().readTimeouts > 0)
}))

rootTest('while one read waits on its callback, other requests are answered', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['held', seededBytes(64 * KiB, 16)], ['other', seededBytes(64 * KiB, 17)]])
  const serve = memoryRead(files)
  let entered: () => void = () => undefined
  const inside = new Promise<void>((resolve) => { entered = resolve })
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => { release = resolve })
  const fs = await mountMemory(defer, tempDir(defer), files, {
    read: async (name, offset, length, signal) => {
      if (name === 'held') {
        entered()
        await released
      }
      return await serve(name, offset, length, signal)
    }
  })
  const held = readFile(join(fs.mountpoint, 'held'))
  await inside
  assert.ok((await readFile(join(fs.mountpoint, 'other'))).equals(files.get('other')!))
  assert.equal((await readdir(fs.mountpoint)).sort(), ['held', 'other'])
  release()
  assert.ok((await held).equals(files.get('held')!))
}))

rootTest('a reader killed while its read waits is released at once (INTERRUPT → EINTR)', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['hang', seededBytes(MiB, 18)]])
  let entered: (signal: AbortSignal) => void = () => undefined
  const inside = new Promise<AbortSignal>((resolve) => { entered = resolve })
  const fs = await mountMemory(defer, tempDir(defer), files, {
    readTimeoutMs: 120_000, // far beyond the test's own limit: only the interrupt can end the read
    read: (_name, _offset, _length, signal) => {
      entered(signal)
      return new Promise<Uint8Array>(() => undefined)
    }
  })
  // O_DIRECT makes the read a request the reader waits on itself (buffered reads go through
  // readahead, which the kernel never interrupts); after SIGKILL it waits for our answer.
  const dd = spawn('dd', [`if=${join(fs.mountpoint, 'hang')}`, 'of=/dev/null', 'bs=4096', 'count=1', 'iflag=direct'], { stdio: 'ignore' })
  const exited = new Promise<NodeJS.Signals | null>((resolve) => dd.once('close', (_code, signal) => resolve(signal)))
  const signal = await inside
  dd.kill('SIGKILL')
  assert.is(await exited, 'SIGKILL')
  assert.ok(signal.aborted, 'the callback was told')
  assert.is(fs.stats().interrupted, 1)
}))

rootTest('a reader that takes a signal it handles while its read waits gets its bytes, not EINTR; a kill after that still releases it', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['held', seededBytes(MiB, 20)], ['hang', seededBytes(MiB, 21)]])
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => { release = resolve })
  let entered: (signal: AbortSignal) => void = () => undefined
  let inside = new Promise<AbortSignal>((resolve) => { entered = resolve })
  const fs = await mountMemory(defer, tempDir(defer), files, {
    readTimeoutMs: 120_000,
    read: async (name, offset, length, signal) => {
      entered(signal)
      if (name === 'hang') return await new Promise<Uint8Array>(() => undefined)
      await released
      return files.get(name)!.subarray(offset, offset + length)
    }
  })
  // perl's handlers are SA_RESTART, and still an EINTR answer would reach sysread: it reports what it got.
  const reader = (name: string): ChildProcess => spawn('perl', ['-MFcntl', '-e',
    '$SIG{USR1} = sub {}; sysopen(F, $ARGV[0], O_RDONLY | O_DIRECT) or die "open: $!"; my $n = sysread(F, my $b, 4096); print defined $n ? "read $n\\n" : "error $!\\n"',
    join(fs.mountpoint, name)], { stdio: ['ignore', 'pipe', 'inherit'] })
  const perl = reader('held')
  defer(() => { perl.kill('SIGKILL') })
  let out = ''
  perl.stdout!.on('data', (b: Buffer) => { out += b.toString() })
  const exited = new Promise<number | null>((resolve) => perl.once('close', (code) => resolve(code)))
  const signal = await inside
  perl.kill('SIGUSR1')
  await waitFor(() => fs.stats().interruptsDeferred === 1, 10_000, 'the kernel to send INTERRUPT')
  assert.not.ok(signal.aborted, 'the read goes on')
  release()
  assert.is(await exited, 0)
  assert.is(out, 'read 4096\n')
  assert.is(fs.stats().interrupted, 0)

  // Interrupted by a handled signal first, then killed: the watch sees the kill and answers.
  inside = new Promise<AbortSignal>((resolve) => { entered = resolve })
  const doomed = reader('hang')
  defer(() => { doomed.kill('SIGKILL') })
  const gone = new Promise<NodeJS.Signals | null>((resolve) => doomed.once('close', (_code, sig) => resolve(sig)))
  const hung = await inside
  doomed.kill('SIGUSR1')
  await waitFor(() => fs.stats().interruptsDeferred === 2, 10_000, 'the second INTERRUPT')
  doomed.kill('SIGKILL')
  assert.is(await gone, 'SIGKILL')
  assert.ok(hung.aborted, 'the callback was told')
  assert.is(fs.stats().interrupted, 1)
}))

rootTest('an unmount by someone else ends the file system; unmount() is then a no-op', timed(20_000, async (defer) => {
  const fs = await mountMemory(defer, tempDir(defer), new Map([['f', Buffer.from('f')]]))
  await run('umount', [fs.mountpoint])
  await fs.closed
  await fs.unmount()
  assert.ok(!testMounts().some((m) => m.mountPoint === fs.mountpoint))
}))

rootTest('unmount of a busy mount detaches it, then aborts the connection: the holder gets an error, not a hang', timed(20_000, async (defer) => {
  const files = new Map<string, Uint8Array>([['f', seededBytes(64 * KiB, 19)]])
  const fs = await mountMemory(defer, tempDir(defer), files, { unmountLingerMs: 200 })
  const handle = await open(join(fs.mountpoint, 'f'), 'r')
  defer(() => handle.close())
  await fs.unmount()
  assert.ok(!testMounts().some((m) => m.mountPoint === fs.mountpoint), 'detached')
  try {
    // Page 0 may still be cached; a page never read has to ask the dead connection.
    await handle.read(Buffer.alloc(4096), 0, 4096, 60 * KiB)
    assert.unreachable('read after abort succeeded')
  } catch (err) {
    assert.ok(['ENOTCONN', 'ECONNABORTED', 'EIO'].includes((err as NodeJS.ErrnoException).code ?? ''), String(err))
  }
}))

rootTest('a process that exits without unmounting leaves no mount and does not hang', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const script = `
    import { mkdirSync } from 'node:fs'
    import { readFile } from 'node:fs/promises'
    import { mountLayerFs } from ${JSON.stringify(new URL('../../../src/images/fuse/index.js', import.meta.url).href)}
    mkdirSync(${JSON.stringify(join(dir, 'mnt'))})
    const fs = await mountLayerFs({ mountpoint: ${JSON.stringify(join(dir, 'mnt'))}, subtype: 'warren-test', files: [{ name: 'f', size: 3 }], read: async () => Buffer.from('abc') })
    process.stdout.write(await readFile(fs.mountpoint + '/f', 'utf8')) // never a *Sync call on our own mount: see index.ts
    process.exit(0)
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  defer(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (b: Buffer) => { out += b.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve))
  assert.is(code, 0)
  assert.is(out, 'abc')
  assert.ok(!testMounts().some((m) => m.mountPoint.startsWith(dir)), 'no mount left')
}))

if (skipReason === undefined) {
  test('no mount of these tests is left', () => {
    assert.equal(testMounts(), [])
  })
}

test.run()
