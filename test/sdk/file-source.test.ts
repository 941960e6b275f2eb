/** What `files.write` takes, cut into chunks: every kind of input gives the same chunks, of the size asked. */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Readable } from 'node:stream'
import { chunksOf, knownSize, type WriteData } from '../../src/sdk/file-source.js'

async function cut (data: WriteData, n: number): Promise<number[][]> {
  const out: number[][] = []
  for await (const c of chunksOf(data, n)) out.push([...c])
  return out
}

const ten = Uint8Array.from({ length: 10 }, (_, i) => i)
const want = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]

test('bytes, ArrayBuffer, a web stream, a Node Readable and an async iterable of odd pieces give the same chunks', async () => {
  assert.equal(await cut(ten, 4), want)
  assert.equal(await cut(ten.buffer, 4), want)
  assert.equal(await cut(new ReadableStream({ start (c) { c.enqueue(ten.subarray(0, 3)); c.enqueue(ten.subarray(3)); c.close() } }), 4), want)
  assert.equal(await cut(Readable.from([Buffer.from(ten.subarray(0, 1)), Buffer.from(ten.subarray(1, 9)), Buffer.from(ten.subarray(9))]), 4), want)
  async function * odd (): AsyncGenerator<Uint8Array> { for (let i = 0; i < 10; i += 3) yield ten.subarray(i, i + 3) }
  assert.equal(await cut(odd(), 4), want)
  assert.equal(await cut('héllo', 2), [[104, 195], [169, 108], [108, 111]])
  assert.equal(await cut(new Uint8Array(0), 4), [], 'nothing, not an empty chunk')
})

test('the size is known up front for bytes and strings only', () => {
  assert.is(knownSize(ten), 10)
  assert.is(knownSize('héllo'), 6)
  assert.is(knownSize(Readable.from([])), undefined)
})

test('a source that refills one buffer for every piece: each chunk keeps its own bytes while later ones are read (as chunks in flight are)', async () => {
  const buffer = new Uint8Array(3)
  async function * refilled (): AsyncGenerator<Uint8Array> {
    for (let i = 0; i < 4; i++) { buffer.fill(i); yield buffer }
  }
  // Kept, not read, until the source is done.
  const kept: Uint8Array[] = []
  for await (const c of chunksOf(refilled(), 2)) kept.push(c)
  assert.equal(kept.map((c) => [...c]), [[0, 0], [0, 1], [1, 1], [2, 2], [2, 3], [3, 3]])
  const whole: Uint8Array[] = []
  for await (const c of chunksOf(refilled(), 3)) whole.push(c)
  assert.equal(whole.map((c) => [...c]), [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]])
})

test.run()
