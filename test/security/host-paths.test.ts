/**
 * Finding 1, host paths through the spec. A tenant's create names only layers the cluster holds:
 * a `name:tag` of the image index, a `sha256:` digest the blob store holds, or the built-in
 * `busybox` base. A host directory (`dir:/etc` once showed /etc/shadow), a Debian suite (once
 * started debootstrap as root), a relative path, `..` or an unknown scheme is refused with
 * WARREN_ERR_BAD_SPEC naming the field, before placement, and nothing is built anywhere. Building
 * from a directory stays the operator's act: `warren image build`, or `warren run --image-dir`
 * with an admin key; a tenant then runs that layer by name.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { ErrorCodes } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { busyboxTree } from '../cluster/harness.js'
import { filesUnder, refusal, runCli, specCluster } from './spec-helpers.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`host-paths tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

ctest('a tenant cannot name a host directory, a Debian suite, a path or an unknown scheme as a layer; nothing is built', timed(180_000, async (defer) => {
  const c = await specCluster(defer, 'hp1')
  // The operator's layers, built the operator's way, so the good fields of each attack hold.
  const base = busyboxTree(join(c.dir, 'base-tree'), ['sh', 'cat'])
  writeFileSync(join(base, 'hello'), 'from the operator\n')
  const built = await runCli(['image', 'build', '--kind', 'base', '--name', 'task:v1', '--from-dir', base, '--store', c.blobs], c.operatorEnv)
  assert.is(built.status, 0, built.stderr)
  const tools = busyboxTree(join(c.dir, 'tools-tree'), [])
  writeFileSync(join(tools, 'tool.txt'), 'tool\n')
  assert.is((await runCli(['image', 'build', '--kind', 'tools', '--name', 'tool:v1', '--from-dir', tools, '--store', c.blobs], c.operatorEnv)).status, 0)
  // One good create first: the node's store then holds what it legitimately needs.
  const ok = await c.tenant.create({ backend: 'container', image: { base: 'task:v1', tools: ['tool:v1'] }, limits: { cpus: 0.1, memoryMiB: 64 } })
  assert.is((await ok.exec(['cat', '/hello', '/tool.txt'])).stdout, 'from the operator\ntool\n')
  await ok.kill()

  const layersBefore = filesUnder(join(c.nodeDir, 'container'))
  const blobsBefore = filesUnder(c.blobs)
  const bad = [
    'dir:/etc', `dir:${join(c.dir, 'cp')}`, `dir:${c.nodeDir}`, 'dir:relative/path', 'dir:../..', 'dir:',
    'debian:bookworm', 'debian:bookworm:python3',
    '/etc', '../etc', './x', 'etc', '..', '.', '',
    'file:///etc', 'http://127.0.0.1/layer', 'oci:alpine', 'docker://alpine:3',
    'sha256:zz', `sha256:${'a'.repeat(63)}`, `SHA256:${'a'.repeat(64)}`,
    `sha256:${'0'.repeat(64)}`, // well-formed, but no such blob
    'nosuch:v1', 'task:v2', 'a/../../etc:x', 'busybox:latest', 'x'.repeat(300), 'task:v1\0'
  ]
  const positions: Array<[string, (ref: string) => Record<string, unknown>]> = [
    ['image.base', (ref) => ({ base: ref })],
    ['image.workspace', (ref) => ({ base: 'task:v1', workspace: ref })],
    ['image.tools.0', (ref) => ({ base: 'task:v1', tools: [ref] })],
    ['image.tools.1', (ref) => ({ base: 'task:v1', tools: ['tool:v1', ref] })]
  ]
  for (const ref of bad) {
    for (const [field, image] of positions) {
      const err = await refusal(c.tenant.create({ backend: 'container', image: image(ref) as { base: string }, limits: { cpus: 0.1, memoryMiB: 64 }, deadlineMs: 3000 }))
      assert.ok(err !== undefined, `${field} = ${JSON.stringify(ref)} was accepted`)
      assert.is(err.code, ErrorCodes.BAD_SPEC, `${field} = ${JSON.stringify(ref)}: ${err.code} ${err.message}`)
      assert.is((err.details as { field?: string } | undefined)?.field, field, `${field} = ${JSON.stringify(ref)}: ${err.message}`)
    }
  }
  // busybox is the built-in base, not a workspace or tools layer.
  for (const [field, image] of positions.slice(1)) {
    const err = await refusal(c.tenant.create({ backend: 'container', image: image('busybox') as { base: string }, limits: { cpus: 0.1, memoryMiB: 64 } }))
    assert.is(err?.code, ErrorCodes.BAD_SPEC, field)
    assert.is((err?.details as { field?: string } | undefined)?.field, field)
  }
  assert.equal(filesUnder(join(c.nodeDir, 'container')).filter((f) => !f.includes('journal')), layersBefore.filter((f) => !f.includes('journal')), 'no layer was built on the node')
  assert.equal(filesUnder(c.blobs), blobsBefore, 'nothing was added to the blob store')
}))

ctest('the operator builds from a directory (image build, run --image-dir); a tenant runs that layer by name and by digest', timed(180_000, async (defer) => {
  const c = await specCluster(defer, 'hp2')
  const tree = busyboxTree(join(c.dir, 'tree'), ['sh', 'cat'])
  writeFileSync(join(tree, 'task.txt'), 'task 17\n')
  const run = await runCli(['run', '--image-dir', tree, '--store', c.blobs, '--', 'cat', '/task.txt'], c.operatorEnv)
  assert.is(run.status, 0, run.stderr)
  assert.is(run.stdout, 'task 17\n')
  const built = await runCli(['image', 'build', '--kind', 'base', '--name', 'task-17:v1', '--from-dir', tree, '--store', c.blobs], c.operatorEnv)
  assert.is(built.status, 0, built.stderr)
  const digest = /^(sha256:[0-9a-f]{64})\s/.exec(built.stdout)?.[1]
  assert.ok(digest !== undefined, built.stdout)
  for (const ref of ['task-17:v1', digest]) {
    const sb = await c.tenant.create({ backend: 'container', image: { base: ref }, limits: { cpus: 0.1, memoryMiB: 64 } })
    defer(() => sb.kill())
    assert.is((await sb.exec(['cat', '/task.txt'])).stdout, 'task 17\n', ref)
    await sb.kill()
  }
  // A layer pushed anywhere but the cluster's blob store is not the cluster's: its digest is
  // refused before placement, naming the field.
  writeFileSync(join(tree, 'other.txt'), 'not in the cluster\n')
  const elsewhere = await runCli(['run', '--image-dir', tree, '--store', join(c.dir, 'elsewhere'), '--', 'cat', '/task.txt'], c.operatorEnv)
  assert.is(elsewhere.status, 1)
  assert.match(elsewhere.stderr, /WARREN_ERR_BAD_SPEC.*image\.base|image\.base.*WARREN_ERR_BAD_SPEC/)
}))

test.run()
