/**
 * Attack (found on this session's own changes): a tree upload whose one member is named
 * `a/a/a/…` 40,000 times over (83 KB, through a GNU long name or a pax header, either of which
 * may hold 4 MiB). The check that no member goes through a symlink the tar made was quadratic
 * in the parts of a name, and froze the whole node for 12.7 s at this size, for minutes at
 * 400 KB, before the 4096-byte path limit refused it. Now a name past what a path may be is
 * refused first, naming `data`.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { containerSkip } from './support.js'
import { filesTarget, rejection, tarHeader } from './support-files.js'

const ctest = containerSkip === undefined ? test : test.skip
if (containerSkip !== undefined) console.log(`tar long name tests skipped: ${containerSkip}`)

/** A 512-byte-padded body. */
const padded = (b: Buffer): Buffer => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)])

/** One pax record: its length (its own digits included), key=value, newline. */
function paxRecord (key: string, value: string): string {
  const rest = ` ${key}=${value}\n`
  let n = rest.length + 1
  while (String(n).length + rest.length !== n) n = String(n).length + rest.length
  return `${n}${rest}`
}

const NAME = 'a/'.repeat(40_000) + 'f'
const longName = (): Buffer => { const body = Buffer.from(NAME + '\0'); return Buffer.concat([tarHeader('././@LongLink', 'L', body.length), padded(body)]) }
const pax = (key: string, value: string): Buffer => { const body = Buffer.from(paxRecord(key, value)); return Buffer.concat([tarHeader('PaxHeader', 'x', body.length), padded(body)]) }

for (const [what, head] of [
  ['a GNU long name', longName],
  ['a pax path', () => pax('path', NAME)],
  ["warren's pax key", () => pax('WARREN.path', Buffer.from(NAME).toString('base64'))]
] as const) {
  ctest(`a member named with 40,000 parts through ${what} is refused as longer than a path, naming data`, timed(60_000, async (defer) => {
    const { files, sb } = await filesTarget(defer, `tarlong-${what.length}`)
    const tar = Buffer.concat([head(), tarHeader('x', '0', 0), Buffer.alloc(1024)])
    await files({ op: 'write-begin', upload: 'long', path: '/tmp/tree', format: 'tar' })
    let refused = await rejection(files({ op: 'write-chunk', upload: 'long', offset: 0, data: tar }))
    refused ??= await rejection(files({ op: 'write-end', upload: 'long', size: tar.length }))
    assert.ok(refused !== undefined, 'the upload was taken')
    assert.is(refused.code, ErrorCodes.INVALID_ARGUMENT, refused.message)
    assert.is(refused.details?.field, 'data')
    assert.match(refused.message, /longer than a path may be/, 'refused by its length, before anything is done per part')
    assert.is((await sb.exec(['ls', '/tmp'])).stdout.includes('tree\n') ? (await sb.exec(['ls', '/tmp/tree'])).stdout : '', '', 'nothing was made')
  }))
}

ctest('a member whose name holds NUL (through warren\'s pax key) is refused naming data', timed(60_000, async (defer) => {
  const { files } = await filesTarget(defer, 'tarnul')
  const tar = Buffer.concat([pax('WARREN.path', Buffer.from('a\0b').toString('base64')), tarHeader('x', '0', 0), Buffer.alloc(1024)])
  await files({ op: 'write-begin', upload: 'nul', path: '/tmp/tree', format: 'tar' })
  let refused = await rejection(files({ op: 'write-chunk', upload: 'nul', offset: 0, data: tar }))
  refused ??= await rejection(files({ op: 'write-end', upload: 'nul', size: tar.length }))
  assert.ok(refused !== undefined, 'the upload was taken')
  assert.equal([refused.code, refused.details?.field], [ErrorCodes.INVALID_ARGUMENT, 'data'], refused.message)
}))

test.run()
