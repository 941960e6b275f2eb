/**
 * What `files.write` accepts, cut into chunks of a fixed size: bytes, a string, a web
 * ReadableStream, or any async iterable of bytes or strings (a Node Readable is one). Bytes
 * given whole are cut as views, not copied. A stream's pieces are copied as they come: a chunk
 * is still in flight (and may be sent again after a reconnect) when the next piece is asked for,
 * and a source may hand out one buffer again and again, refilled.
 */

/** The data of a write. */
export type WriteData = Uint8Array | ArrayBuffer | string | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>

const encoder = new TextEncoder()

/** The size of `data` when it is known up front (bytes and strings), so the node can refuse it at once. */
export function knownSize (data: WriteData): number | undefined {
  if (data instanceof Uint8Array) return data.byteLength
  if (data instanceof ArrayBuffer) return data.byteLength
  if (typeof data === 'string') return Buffer.byteLength(data, 'utf8')
  return undefined
}

/** A stream's piece as bytes of its own (see the file's head). */
function ownBytes (piece: Uint8Array | string): Uint8Array {
  return typeof piece === 'string' ? encoder.encode(piece) : Uint8Array.prototype.slice.call(piece)
}

async function * pieces (data: WriteData): AsyncGenerator<Uint8Array> {
  if (data instanceof Uint8Array) { yield data; return }
  if (data instanceof ArrayBuffer) { yield new Uint8Array(data); return }
  if (typeof data === 'string') { yield encoder.encode(data); return }
  if (typeof (data as ReadableStream<Uint8Array>).getReader === 'function' && !(Symbol.asyncIterator in data)) {
    const reader = (data as ReadableStream<Uint8Array>).getReader()
    try {
      for (;;) {
        const r = await reader.read()
        if (r.done) return
        yield ownBytes(r.value)
      }
    } finally {
      reader.releaseLock()
    }
  }
  for await (const piece of data as AsyncIterable<Uint8Array | string>) yield ownBytes(piece)
}

/**
 * The data in chunks of exactly `chunkBytes` (the last may be shorter; none is empty).
 * @param data what the caller gave
 * @param chunkBytes the size of a chunk
 */
export async function * chunksOf (data: WriteData, chunkBytes: number): AsyncGenerator<Uint8Array> {
  let held: Uint8Array[] = []
  let heldBytes = 0
  for await (const piece of pieces(data)) {
    let at = 0
    // Whole chunks straight out of a large piece, as views.
    if (heldBytes === 0) {
      while (piece.byteLength - at >= chunkBytes) { yield piece.subarray(at, at + chunkBytes); at += chunkBytes }
    }
    while (at < piece.byteLength) {
      const take = Math.min(chunkBytes - heldBytes, piece.byteLength - at)
      held.push(piece.subarray(at, at + take))
      heldBytes += take
      at += take
      if (heldBytes === chunkBytes) {
        yield Buffer.concat(held, heldBytes)
        held = []
        heldBytes = 0
      }
    }
  }
  if (heldBytes > 0) yield held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes)
}
