/**
 * The host's end of a VM's egress port against a guest that speaks for itself (its root can):
 * here a peer on the port's socket in place of QEMU. Found by an attack from inside a VM: a
 * guest that flooded the port with OPEN frames and never read took `warren up` to 4.5 GiB and
 * out of memory in 35 s, the answers queued without bound. Now the port is not read while the
 * guest leaves what it was sent, and a connection's credit cannot pass its window.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startEgressMux, type EgressMux } from '../../../src/backends/microvm/index.js'
import { timed, waitFor } from '../../support/index.js'

const K = { open: 1, data: 2, close: 4, credit: 5, ready: 7 }

function frame (id: number, kind: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9)
  h.writeUInt32BE(id, 0)
  h[4] = kind
  h.writeUInt32BE(payload.length, 5)
  return Buffer.concat([h, payload])
}

/** The frames in `bytes` (whole ones), as [id, kind]. */
function frames (bytes: Buffer): Array<[number, number]> {
  const out: Array<[number, number]> = []
  for (let at = 0; at + 9 <= bytes.length;) {
    const n = bytes.readUInt32BE(at + 5)
    if (at + 9 + n > bytes.length) break
    out.push([bytes.readUInt32BE(at), bytes[at + 4]!])
    at += 9 + n
  }
  return out
}

/** A unix socket server standing for QEMU's end of the port; resolves with the mux's connection. */
async function guestPort (defer: (fn: () => unknown) => void): Promise<{ path: string, accepted: Promise<Socket> }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-egmux-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'egress.sock')
  let server!: Server
  const accepted = new Promise<Socket>((resolve) => { server = createServer(resolve) })
  await new Promise<void>((resolve) => server.listen(path, resolve))
  defer(() => server.close())
  return { path, accepted }
}

test('a guest that floods OPENs and reads nothing stops being read: what waits for it stays bounded, and every answer comes once it reads', timed(60_000, async (defer) => {
  const { path, accepted } = await guestPort(defer)
  const mux: EgressMux = await startEgressMux(path)
  defer(() => mux.close())
  const guest = await accepted
  defer(() => guest.destroy())
  guest.pause()
  // 500,000 OPENs (4.5 MB) at once; no proxy, so each is answered CLOSE.
  const count = 500_000
  const opens = Buffer.alloc(count * 9)
  for (let i = 0; i < count; i++) frame(i + 1, K.open).copy(opens, i * 9)
  guest.write(Buffer.concat([frame(0, K.ready, Buffer.from('warren-egress-1')), opens]))
  await waitFor(() => !mux.reading, 30_000, 'the port no longer read')
  const held = mux.queuedBytes
  assert.ok(held < 512 * 1024, `${held} bytes wait for the guest`)
  assert.ok(guest.writableLength > 0, 'what the guest sent waits on its side')

  // The guest reads: the rest is read and answered, every OPEN once.
  let got = Buffer.alloc(0)
  guest.on('data', (b: Buffer) => { got = Buffer.concat([got, b]) })
  guest.resume()
  await waitFor(() => frames(got.subarray(24)).length >= count, 30_000, 'every OPEN answered')
  const answers = frames(got.subarray(24))
  assert.is(answers.length, count)
  assert.ok(answers.every(([id, kind], i) => id === i + 1 && kind === K.close))
}))

test('credit past a connection\'s window closes it: the proxy is not asked for more than the window', timed(20_000, async (defer) => {
  const { path, accepted } = await guestPort(defer)
  const proxyPath = join(path, '..', 'proxy.sock')
  const proxied: Array<{ closed: boolean }> = []
  const proxy = createServer((s) => {
    const seen = { closed: false }
    proxied.push(seen)
    s.on('error', () => {})
    s.on('close', () => { seen.closed = true })
    s.resume()
  })
  await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve))
  defer(() => proxy.close())
  const mux = await startEgressMux(path, proxyPath)
  defer(() => mux.close())
  const guest = await accepted
  defer(() => guest.destroy())
  let got = Buffer.alloc(0)
  guest.on('data', (b: Buffer) => { got = Buffer.concat([got, b]) })
  guest.write(Buffer.concat([frame(0, K.ready, Buffer.from('warren-egress-1')), frame(1, K.open)]))
  await waitFor(() => mux.open === 1 && proxied.length === 1, 10_000, 'the connection open')
  const credit = Buffer.alloc(4)
  credit.writeUInt32BE(2 ** 31, 0)
  guest.write(frame(1, K.credit, credit))
  await waitFor(() => frames(got.subarray(24)).some(([id, kind]) => id === 1 && kind === K.close), 10_000, 'closed to the guest')
  assert.is(mux.open, 0)
  await waitFor(() => proxied[0]!.closed, 10_000, 'and to the proxy')
}))

test.run()
