/**
 * A layer's kind (base, workspace, tools) is recorded when it is pushed or tagged and checked
 * when a spec stacks it; abandoned uploads are swept with their staged bytes.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../../src/errors.js'
import { pushLayerOverHttp, Uploads } from '../../../src/images/upload/index.js'
import type { LayerKind } from '../../../src/images/index.js'
import { timed } from '../../support/index.js'
import { CHUNK, layerFile, uploadCluster, type UploadCluster } from './helpers.js'

async function refusal (p: Promise<unknown>): Promise<WarrenError> {
  try {
    await p
  } catch (err) {
    if (isWarrenError(err)) return err
    throw err
  }
  throw new Error('not refused')
}

async function pushed (c: UploadCluster, name: string, kind: LayerKind, seed: number): Promise<string> {
  const layer = await layerFile(c.dir, `${name}.img`, 3 * CHUNK, seed)
  const r = await pushLayerOverHttp(layer.file, { url: c.cp.url, token: c.keys.builder, kind, chunkBytes: CHUNK })
  return r.digest
}

test('a workspace layer named as a base is refused at create with BAD_SPEC naming image.base, by tag and by digest; each position takes its own kind', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const base = await pushed(c, 'base', 'base', 11)
  const ws = await pushed(c, 'ws', 'workspace', 12)
  const tools = await pushed(c, 'tools', 'tools', 13)
  await c.admin.request({ type: 'image-tag', name: 'task:1', digest: ws, kind: 'workspace' })
  await c.admin.request({ type: 'image-tag', name: 'py:1', digest: base, kind: 'base' })
  await c.admin.request({ type: 'image-tag', name: 'gcc:1', digest: tools, kind: 'tools' })
  const create = (image: { base: string, workspace?: string, tools?: string[] }): Promise<WarrenError> =>
    refusal(c.tenant.create({ backend: 'container', image, limits: { cpus: 0.1, memoryMiB: 64 }, deadlineMs: 300 }))

  for (const ref of ['task:1', ws]) {
    const err = await create({ base: ref })
    assert.equal([err.code, err.details?.field], [ErrorCodes.BAD_SPEC, 'image.base'], `${ref}: ${err.message}`)
    assert.match(err.message, /is a workspace layer, and image\.base takes a base layer/)
  }
  const asWorkspace = await create({ base: 'py:1', workspace: 'gcc:1' })
  assert.equal([asWorkspace.code, asWorkspace.details?.field], [ErrorCodes.BAD_SPEC, 'image.workspace'])
  const asTools = await create({ base: 'py:1', workspace: 'task:1', tools: ['gcc:1', base] })
  assert.equal([asTools.code, asTools.details?.field], [ErrorCodes.BAD_SPEC, 'image.tools.1'])
  // The right stack passes every image check: with no node to place on, it fails for capacity instead.
  for (const image of [{ base: 'py:1', workspace: 'task:1', tools: ['gcc:1'] }, { base, workspace: ws, tools: [tools] }, { base: 'busybox', workspace: ws }]) {
    const err = await create(image)
    assert.is(err.code, ErrorCodes.NO_CAPACITY, `${JSON.stringify(image)}: ${err.message}`)
  }
}))

test('a layer keeps the kind it was pushed as: tagging or pushing it as another kind is refused naming kind', timed(30_000, async (defer) => {
  const c = await uploadCluster(defer)
  const ws = await pushed(c, 'ws', 'workspace', 14)
  const tag = await refusal(c.admin.request({ type: 'image-tag', name: 'sneaky:1', digest: ws, kind: 'base' }))
  assert.equal([tag.code, tag.details?.field], [ErrorCodes.INVALID_ARGUMENT, 'kind'])
  assert.match(tag.message, /is a workspace layer/)
  const again = await refusal(pushed(c, 'ws', 'base', 14))
  assert.equal([again.code, again.details?.field], [ErrorCodes.INVALID_ARGUMENT, 'kind'])
  assert.equal(await c.admin.request({ type: 'image-list' }), [], 'the refused tag left no name')
}))

test('an upload nobody writes to is swept with its staged bytes once idle past its timeout, freeing its slot', timed(30_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-sweep-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const uploads = new Uploads({
    root: join(dir, 'blobs'), stagingDir: join(dir, 'uploads'), recordLayer: async () => {},
    tunables: { idleTimeoutMs: 60_000, sweepIntervalMs: 3_600_000, maxUploadsPerTenant: 1 }
  })
  defer(() => uploads.close())
  const layer = await layerFile(dir, 'layer.img', 3 * CHUNK, 15)
  const other = await layerFile(dir, 'other.img', 3 * CHUNK, 16)
  const open = await uploads.begin('t1', layer.manifest, 'base')
  assert.is(open.state, 'open')
  await uploads.write('t1', layer.manifest.digest, 0, layer.bytes.subarray(0, CHUNK))
  const staged = join(dir, 'uploads', 't1', layer.manifest.digest.slice(7))
  assert.is(await uploads.sweep(Date.now()), 0, 'a fresh upload stays')
  assert.ok(existsSync(staged))
  assert.is((await refusal(uploads.begin('t1', other.manifest, 'base'))).code, ErrorCodes.QUOTA)
  assert.is(await uploads.sweep(Date.now() + 61_000), 1)
  assert.not.ok(existsSync(staged), 'the staged bytes are gone')
  assert.is((await uploads.begin('t1', other.manifest, 'base')).state, 'open', 'the slot is free again')
  assert.is((await refusal(uploads.commit('t1', layer.manifest.digest))).code, ErrorCodes.NOT_FOUND)
}))

test.run()
