/**
 * Attack (held): a tree upload whose tar opens with a pax extended header (or a GNU long name)
 * declaring a body of hundreds of MiB. The tar parser keeps a long header in memory until all of
 * it has come, acknowledging every chunk meanwhile, so without a bound a tenant could make the
 * node hold the maximum file size (1 GiB) per upload, none of it charged to the sandbox. The
 * parser (tar-stream 3) refuses a long header past 4 MiB; this pins that the refusal reaches the
 * tenant naming `data`, early, and that the node's memory does not grow by what was sent.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { FilesDefaults } from '../../src/cluster/index.js'
import { ErrorCodes } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { containerSkip } from './support.js'
import { filesTarget, rejection, rssOf, tarHeader } from './support-files.js'

const ctest = containerSkip === undefined ? test : test.skip
if (containerSkip !== undefined) console.log(`tar header bomb tests skipped: ${containerSkip}`)

const MiB = 1024 * 1024
/** What the attacker sends of the header's declared body. */
const SENT = 96 * MiB
/** The parser's bound on a long header (tar-stream's MAX_HEADER_SIZE). */
const LONG_HEADER_MAX = 4 * MiB
/** What the node may grow by meanwhile (the chunks in flight and the allocator's slack). */
const MAX_GROWTH = 32 * MiB

for (const [what, type] of [['a pax extended header', 'x'], ['a GNU long name', 'L']] as const) {
  ctest(`a tar upload opening with ${what} of 512 MiB is refused naming data, and the node does not hold what was sent`, timed(120_000, async (defer) => {
    const { files, nodePid } = await filesTarget(defer, `tarbomb-${type}`)
    await files({ op: 'write-begin', upload: 'bomb', path: '/tmp/tree', format: 'tar' })
    const before = rssOf(nodePid)
    let peak = before
    const chunk = FilesDefaults.maxChunkBytes
    let offset = 0
    let refused
    const first = Buffer.concat([tarHeader('././@PaxHeader', type, 512 * MiB), Buffer.alloc(chunk - 512, 0x61)])
    while (offset < SENT && refused === undefined) {
      const data = offset === 0 ? first : Buffer.alloc(chunk, 0x61)
      refused = await rejection(files({ op: 'write-chunk', upload: 'bomb', offset, data }))
      offset += chunk
      peak = Math.max(peak, rssOf(nodePid))
    }
    assert.ok(refused !== undefined, `${offset} bytes of one long header were taken; the node grew by ${((peak - before) / MiB).toFixed(0)} MiB`)
    assert.is(refused.code, ErrorCodes.INVALID_ARGUMENT, refused.message)
    assert.is(refused.details?.field, 'data', refused.message)
    assert.ok(offset <= LONG_HEADER_MAX + 2 * chunk, `refused only after ${offset} bytes`)
    assert.ok(peak - before < MAX_GROWTH, `the node grew by ${((peak - before) / MiB).toFixed(0)} MiB`)
    // The upload is over: another chunk finds it failed.
    assert.ok(await rejection(files({ op: 'write-chunk', upload: 'bomb', offset, data: Buffer.alloc(1) })) !== undefined)
  }))
}

test.run()
