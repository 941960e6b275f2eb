/**
 * Finding: chunks sent ahead of a gap are held in the node's memory (for the sha256, which goes
 * in order) until the gap is filled. Each upload may hold `uploadWindowBytes` (16 MiB) so, and a
 * sandbox may have 16 uploads open: a tenant who never sends offset 0 made the node hold 256 MiB
 * per sandbox, none of it charged to the sandbox, for as long as the uploads stay busy. All the
 * uploads of a node together hold at most `FilesDefaults.nodeAheadBytes`; past it a chunk ahead of
 * its gap is refused OVERLOADED with a retry hint (an in-order chunk is always taken, so every
 * upload can still finish), and the node's memory stays bounded.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { FilesDefaults } from '../../src/cluster/index.js'
import { ErrorCodes } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { containerSkip } from './support.js'
import { filesTarget, rejection, rssOf } from './support-files.js'

const ctest = containerSkip === undefined ? test : test.skip
if (containerSkip !== undefined) console.log(`upload gap tests skipped: ${containerSkip}`)

const MiB = 1024 * 1024
/**
 * What the node may grow by: the node-wide bound, and the refused chunks' frames not yet
 * collected (RSS counts garbage; 101 MiB was measured with the bound at 64 MiB, 251 MiB without it).
 */
const MAX_GROWTH = FilesDefaults.nodeAheadBytes + 64 * MiB

ctest('16 uploads each holding chunks ahead of a gap that is never filled: the node holds a bounded amount, the rest is OVERLOADED', timed(180_000, async (defer) => {
  const { files, nodePid } = await filesTarget(defer, 'gaps')
  const chunk = FilesDefaults.maxChunkBytes
  const uploads = FilesDefaults.maxOpenUploads
  for (let u = 0; u < uploads; u++) await files({ op: 'write-begin', upload: `gap-${u}`, path: `/tmp/tree-${u}`, format: 'tar' })
  const before = rssOf(nodePid)
  let peak = before
  let held = 0
  const refusals = new Map<string, number>()
  for (let u = 0; u < uploads; u++) {
    // Offset 0 never comes: every chunk waits for it.
    for (let offset = chunk; offset + chunk <= FilesDefaults.uploadWindowBytes; offset += chunk) {
      const err = await rejection(files({ op: 'write-chunk', upload: `gap-${u}`, offset, data: Buffer.alloc(chunk, u) }))
      if (err === undefined) held += chunk
      else {
        refusals.set(err.code, (refusals.get(err.code) ?? 0) + 1)
        if (err.code === ErrorCodes.OVERLOADED) assert.ok(typeof err.details?.retryAfterMs === 'number', err.message)
      }
      peak = Math.max(peak, rssOf(nodePid))
    }
  }
  console.log(`held ahead ${(held / MiB).toFixed(0)} MiB; node grew ${((peak - before) / MiB).toFixed(0)} MiB; refusals ${JSON.stringify([...refusals])}`)
  assert.ok(peak - before < MAX_GROWTH, `the node grew by ${((peak - before) / MiB).toFixed(0)} MiB holding ${(held / MiB).toFixed(0)} MiB ahead of gaps`)
  assert.ok(held <= FilesDefaults.nodeAheadBytes, `${held} bytes held ahead`)
  assert.equal([...refusals.keys()], [ErrorCodes.OVERLOADED])
  // An in-order chunk is still taken: the gap of one upload fills and its held chunks drain.
  const r = await files({ op: 'write-chunk', upload: 'gap-0', offset: 0, data: Buffer.alloc(chunk, 0) }) as { received: number }
  assert.ok(r.received > chunk, `received ${r.received}`)
}))

test.run()
