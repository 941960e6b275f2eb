/**
 * An upload on the node, on its own: chunks in any order and repeated make the same bytes and
 * the same sha256, the bounds are refused naming their field, and the sink sees every chunk in
 * arrival order with the bytes it made contiguous.
 */
import { createHash } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { FilesDefaults, memberPath } from '../../src/cluster/index.js'
import { Upload, type UploadSink } from '../../src/cluster/sandbox/file-upload.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'

/** A sink that keeps what it was given: the file by offset, and the ordered bytes as a tar sink would see them. */
function memorySink (): UploadSink & { file: number[], ordered: number[], finished: boolean, aborted: boolean } {
  const sink = {
    file: [] as number[], ordered: [] as number[], finished: false, aborted: false,
    async take (offset: number, data: Uint8Array, ordered: Uint8Array[]) {
      data.forEach((b, i) => { sink.file[offset + i] = b })
      for (const o of ordered) sink.ordered.push(...o)
    },
    async finish () { sink.finished = true },
    async abort () { sink.aborted = true }
  }
  return sink
}

const limits = { ...FilesDefaults, maxFileBytes: 100, maxChunkBytes: 10, uploadWindowBytes: 30 }
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const hex = (s: string): string => createHash('sha256').update(s).digest('hex')

async function refusal (p: Promise<unknown>): Promise<{ code: string, field: unknown }> {
  const e = await p.then(() => undefined, (err: unknown) => err)
  assert.ok(isWarrenError(e), String(e))
  return { code: e.code, field: (e.details as { field?: unknown } | undefined)?.field }
}

test('chunks out of order and repeated make the same bytes, in order for the sink, and the sha256 of the whole', async () => {
  const sink = memorySink()
  const up = new Upload('u', '/f', sink, limits)
  await up.chunk(10, bytes('klmnopqrst'))
  await up.chunk(0, bytes('abcdefghij'))
  await up.chunk(0, bytes('abcdefghij'))
  await up.chunk(5, bytes('fghijklmno'))
  await up.chunk(20, bytes('uvw'))
  assert.is(up.offset, 23)
  const r = await up.end(23, hex('abcdefghijklmnopqrstuvw'))
  assert.equal(r, { size: 23, sha256: hex('abcdefghijklmnopqrstuvw') })
  assert.is(String.fromCharCode(...sink.file), 'abcdefghijklmnopqrstuvw')
  assert.is(String.fromCharCode(...sink.ordered), 'abcdefghijklmnopqrstuvw', 'each byte handed in order exactly once')
  assert.ok(sink.finished)
})

test('bounds: past the maximum names size, a big chunk names data, too far ahead names offset; a gap or a wrong hash at the end is refused', async () => {
  const up = new Upload('u', '/f', memorySink(), limits)
  assert.equal(await refusal(up.chunk(95, bytes('0123456789'))), { code: ErrorCodes.INVALID_ARGUMENT, field: 'size' })
  assert.equal(await refusal(up.chunk(0, bytes('0123456789x'))), { code: ErrorCodes.INVALID_ARGUMENT, field: 'data' })
  assert.equal(await refusal(up.chunk(31, bytes('x'))), { code: ErrorCodes.INVALID_ARGUMENT, field: 'offset' })
  await up.chunk(10, bytes('x'))
  assert.equal(await refusal(up.end(11, undefined)), { code: ErrorCodes.INVALID_ARGUMENT, field: 'size' })
  const other = new Upload('v', '/f', memorySink(), limits)
  await other.chunk(0, bytes('abc'))
  assert.equal(await refusal(other.end(3, hex('abd'))), { code: ErrorCodes.INVALID_ARGUMENT, field: 'sha256' })
  assert.equal(await refusal(other.end(200, undefined)), { code: ErrorCodes.INVALID_ARGUMENT, field: 'size' })
})

test('a sink that fails fails the upload for good', async () => {
  const sink = memorySink()
  sink.take = async () => { throw new Error('disk full') }
  const up = new Upload('u', '/f', sink, limits)
  await up.chunk(0, bytes('a')).then(() => assert.unreachable(), (e: Error) => assert.is(e.message, 'disk full'))
  await up.chunk(1, bytes('b')).then(() => assert.unreachable(), (e: Error) => assert.is(e.message, 'disk full'))
  await up.end(2, undefined).then(() => assert.unreachable(), (e: Error) => assert.is(e.message, 'disk full'))
})

test('tar member names: relative parts only; absolute names and .. are refused', () => {
  assert.equal(memberPath('./a//b/./c/'), ['a', 'b', 'c'])
  assert.equal(memberPath('.'), [])
  for (const bad of ['/etc/passwd', '../x', 'a/../../x', 'a/..']) {
    assert.ok(isWarrenError((() => { try { memberPath(bad) } catch (e) { return e } })(), ErrorCodes.INVALID_ARGUMENT), bad)
  }
})

test.run()
