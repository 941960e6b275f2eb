/**
 * A sandbox that cannot start says why. Each failure is made for real on a container node: a
 * layer whose chunk manifest the blob store no longer holds (it cannot be fetched), a layer
 * whose bytes are not a filesystem, a stack with such a layer on top, a blob damaged after it
 * was stored. The create's error carries the backend's cause with a public code, never the
 * kernel's "has stopped", and names no directory of the node.
 */
import { chmodSync, closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { pushLayer, storePaths } from '../../src/images/blob/index.js'
import { buildLayerFromDir } from '../../src/images/index.js'
import { connect, type CreateSpec } from '../../src/sdk/index.js'
import { timed } from '../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`start-failure tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const KERNEL_CODES = new Set<string>([ErrorCodes.ACTOR_STOPPED, ErrorCodes.ACTOR_FAILED, ErrorCodes.NO_SUCH_ACTOR, ErrorCodes.ASK_TIMEOUT, ErrorCodes.DUPLICATE_NAME, ErrorCodes.SUPERVISOR_INTENSITY])

/** A one-file busybox layer (`marker` makes its digest its own), pushed to the store at `blobs`. */
async function busyboxLayer (dir: string, blobs: string, marker: string): Promise<string> {
  const tree = join(dir, `tree-${marker}`)
  mkdirSync(join(tree, 'bin'), { recursive: true })
  copyFileSync('/bin/busybox', join(tree, 'bin', 'sh'))
  chmodSync(join(tree, 'bin', 'sh'), 0o755)
  writeFileSync(join(tree, 'marker'), marker)
  const built = await buildLayerFromDir(tree, join(dir, `build-${marker}`))
  return (await pushLayer(blobs, built.path)).digest
}

ctest('a sandbox that cannot start says why: a layer that cannot be fetched, one that is not a filesystem, a bad stack, a damaged blob', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-fail-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await spawnNode(cp, 'nfail', join(dir, 'node'))
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const blobs = join(dir, 'cp', 'blobs')
  const container = (image: NonNullable<CreateSpec['image']>): CreateSpec => ({ backend: 'container', image, limits: { cpus: 0.1, memoryMiB: 64 } })
  const refused = async (spec: CreateSpec, code: string, cause: RegExp): Promise<WarrenError> => {
    const err = await client.create(spec).catch((e: unknown) => e)
    assert.ok(isWarrenError(err), String(err))
    assert.ok(!KERNEL_CODES.has(err.code), `${err.code}: ${err.message}`)
    assert.is(err.code, code, err.message)
    assert.match(err.message, /could not start on the container backend: /)
    assert.match(err.message, cause)
    assert.not.match(err.message, /has stopped|actor/)
    assert.not.ok(err.message.includes(dir) || err.message.includes('/run/'), `names a node directory: ${err.message}`)
    return err
  }

  const good = await busyboxLayer(dir, blobs, 'good')
  // Its chunk manifest is gone from the store: the node cannot fetch the layer.
  const unfetchable = await busyboxLayer(dir, blobs, 'unfetchable')
  rmSync(storePaths(blobs, unfetchable).manifest)
  const err = await refused(container({ base: unfetchable }), ErrorCodes.NOT_FOUND, /404 Not Found/)
  assert.ok(err.message.includes(unfetchable.slice('sha256:'.length)), 'names the layer')

  // Bytes that are not an erofs image, stored under their true digest: the mount fails.
  writeFileSync(join(dir, 'garbage.erofs'), Buffer.alloc(1 << 16, 7))
  const garbage = (await pushLayer(blobs, join(dir, 'garbage.erofs'))).digest
  await refused(container({ base: garbage }), ErrorCodes.BACKEND_UNAVAILABLE, /mount \S+\.erofs on l0 \(erofs\): Invalid argument/)
  // A stack whose second layer is such a one: the message says which layer of the stack.
  await refused(container({ base: good, workspace: garbage }), ErrorCodes.BACKEND_UNAVAILABLE, /on l1 \(erofs\)/)

  // A blob damaged in the store after it was pushed (same size, other bytes).
  const damaged = await busyboxLayer(dir, blobs, 'damaged')
  const fd = openSync(storePaths(blobs, damaged).blob, 'r+')
  writeSync(fd, Buffer.alloc(4096, 0x41), 0, 4096, 8192)
  closeSync(fd)
  await refused(container({ base: damaged }), ErrorCodes.BACKEND_UNAVAILABLE, /mount \S+\.erofs on l0 \(erofs\): I\/O error/)

  // None of them holds anything: no record is left, and a good layer starts and runs.
  assert.equal(await client.list({ all: true }), [])
  const sb = await client.create(container({ base: good }))
  assert.is((await sb.exec(['sh', '-c', 'cat /marker'])).stdout, 'good')
}))

test.run()
