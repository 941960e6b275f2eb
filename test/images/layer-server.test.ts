import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { readdir, readFile, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { startLayerService, type LayerService } from '../../src/images/index.js'
import { clearStaleLayerFs } from '../../src/images/fuse/index.js'
import { createLinkClient } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { pushBytes, seededBytes, startStore, tempDir, TOKEN } from './blob/helpers.js'

// The server mounts FUSE: root only, like the container tests.
const why = containerUnavailable()
if (why !== undefined) console.log(`layer server tests skipped: ${why}`)
const ftest = why === undefined ? test : test.skip

const gone = (pid: number): boolean => { try { process.kill(pid, 0); return false } catch { return true } }
const mounted = (mountpoint: string): boolean => readFileSync('/proc/self/mountinfo', 'utf8').includes(` ${mountpoint} `)

async function service (defer: (fn: () => unknown) => void, idleExitMs?: number): Promise<{ svc: LayerService, dir: string, digest: string, bytes: Buffer, mountpoint: string }> {
  const dir = tempDir(defer, 'warren-layer-server-')
  const bytes = seededBytes((5 << 20) + 123, 7)
  const pushed = await pushBytes(dir, join(dir, 'store'), 'layer.bin', bytes, 1 << 20)
  const store = await startStore(defer, join(dir, 'store'))
  const mountpoint = `/run/warren/layers/test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const svc = await startLayerService({
    dir: join(dir, 'server'), cacheDir: join(dir, 'cache'), mountpoint,
    source: { baseUrl: store.url, token: TOKEN },
    ...(idleExitMs !== undefined ? { idleExitMs } : {})
  })
  defer(async () => {
    await svc.close()
    if (!gone(svc.pid)) process.kill(svc.pid, 'SIGKILL')
    // A server killed in the middle leaves its mount dead: detach it, and its directory.
    await clearStaleLayerFs(mountpoint)
    await rmdir(mountpoint).catch(() => {})
  })
  return { svc, dir, digest: pushed.digest, bytes, mountpoint }
}

ftest('the layer server presents a layer as a file read byte-exact from another process; killed, the next request starts a new one', timed(60_000, async (defer) => {
  const { svc, digest, bytes, mountpoint } = await service(defer)
  const path = await svc.resolve(digest)
  // Asynchronous reads only: the blob store the server fetches from is served by this process.
  assert.ok((await readFile(path)).equals(bytes))
  assert.ok((await svc.metrics()).bytesFetched >= bytes.length)

  const first = svc.pid
  process.kill(first, 'SIGKILL')
  await waitFor(() => gone(first), 5000, 'server killed')
  // The link notices, finds the server dead and starts another on the same mount point.
  const again = await waitFor(async () => await svc.resolve(digest).catch(() => undefined), 20_000, 'a new server answers')
  assert.is.not(svc.pid, first)
  assert.ok((await readFile(again)).equals(bytes), 'served again, from the chunks already cached')
  assert.ok(mounted(mountpoint))

  // Nothing survived (sync with no users): the layer is no longer presented (the kernel may
  // still have its pages cached, so the listing says it, not a read).
  assert.equal(await readdir(mountpoint), [again.slice(mountpoint.length + 1)])
  await svc.sync({})
  assert.equal(await readdir(mountpoint), [])
  const pid = svc.pid
  await svc.close()
  // close() returns once the server has exited; its parent (this process) reaps it a moment later.
  await waitFor(() => gone(pid), 5000, 'closed, the server has exited and been reaped')
  assert.not.ok(mounted(mountpoint), 'and left no mount')
}))

ftest('bad requests are INVALID_ARGUMENT; a link with the wrong token is refused', timed(30_000, async (defer) => {
  const { svc, dir } = await service(defer)
  assert.ok(isWarrenError(await svc.resolve('sha256:nothex').catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT))
  assert.ok(isWarrenError(await svc.release('latest').catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT))
  const intruder = createLinkClient({ url: `ws+unix://${join(dir, 'server', 'layers.sock')}:/`, token: 'guess', reconnect: { maxAttempts: 0 } })
  defer(() => intruder.close())
  assert.ok(isWarrenError(await intruder.connect().catch((e: unknown) => e), ErrorCodes.UNAUTHENTICATED))
}))

ftest('a pid file naming some other live process (a pid reused after a reboot) does not pass for a server: a new one starts', timed(30_000, async (defer) => {
  const dir = tempDir(defer, 'warren-layer-server-')
  const store = await startStore(defer, join(dir, 'store'))
  const serverDir = join(dir, 'server')
  mkdirSync(serverDir)
  writeFileSync(join(serverDir, 'pid'), String(process.pid))
  writeFileSync(join(serverDir, 'token'), 'stale')
  writeFileSync(join(serverDir, 'layers.sock'), '')
  const mountpoint = `/run/warren/layers/test-${process.pid}-reuse`
  const svc = await startLayerService({ dir: serverDir, cacheDir: join(dir, 'cache'), mountpoint, source: { baseUrl: store.url, token: TOKEN } })
  defer(async () => { await svc.close(); await rmdir(mountpoint).catch(() => {}) })
  assert.is.not(svc.pid, process.pid)
  assert.equal(await svc.cached(), [])
}))

ftest('a server whose node never comes back ends once nothing uses its layers', timed(30_000, async (defer) => {
  const { svc, mountpoint } = await service(defer, 300)
  await svc.detach()
  await waitFor(() => gone(svc.pid), 15_000, 'orphan server exits')
  assert.not.ok(mounted(mountpoint))
}))

test.run()
