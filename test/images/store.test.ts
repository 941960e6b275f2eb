import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { LayerStore } from '../../src/images/index.js'
import { timed } from '../support/index.js'

test('a node\'s layer store builds no layer from a host directory or a Debian suite, whatever a create names', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-store-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const store = new LayerStore(dir)
  for (const ref of ['dir:/etc', 'dir:relative', 'debian:bookworm', 'debian:bookworm:python3', 'sha256:../../etc', `sha256:${'A'.repeat(64)}`, '/etc', 'file:///etc', '']) {
    const err = await store.resolve(ref).then(() => undefined, (e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.BAD_SPEC), `${JSON.stringify(ref)}: ${String(err)}`)
  }
  assert.equal(readdirSync(dir), [], 'nothing was built')
}))


test('the store keeps its whole files under a bound: the least recently used go first, never a recent one; a layer swept is pulled again when named', timed(20_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-store-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const blobs = new Map<string, Buffer>()
  const refOf = (data: Buffer): string => {
    const hex = createHash('sha256').update(data).digest('hex')
    blobs.set(hex, data)
    return `sha256:${hex}`
  }
  let pulls = 0
  const server = createServer((req, res) => {
    const blob = blobs.get(String(req.url).split('/').pop() ?? '')
    if (blob === undefined) { res.writeHead(404).end(); return }
    pulls++
    res.writeHead(200).end(blob)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  defer(() => new Promise((resolve) => server.close(resolve)))
  const store = new LayerStore(dir, { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't' })
  const MiB = 1024 * 1024
  const [a, b, c] = [1, 2, 3].map((n) => refOf(Buffer.alloc(MiB, n))) as [string, string, string]
  const pathOf = async (ref: string): Promise<string> => await store.resolve(ref)
  const [pa, pb, pc] = [await pathOf(a), await pathOf(b), await pathOf(c)]
  assert.is(pulls, 3)
  const hoursAgo = (h: number): Date => new Date(Date.now() - h * 3_600_000)
  utimesSync(pa, hoursAgo(1), hoursAgo(1))
  utimesSync(pb, hoursAgo(2), hoursAgo(2))
  // Past 2 MiB: the least recently used (b) goes, and that is enough.
  assert.equal(store.sweep(2 * MiB, 10 * 60_000), [pb])
  assert.equal(readdirSync(dir).sort(), [pa, pc].map((p) => p.split('/').pop()).sort())
  // Nothing used in the last ten minutes goes, however far past the bound.
  assert.equal(store.sweep(0, 10 * 60_000), [pa])
  assert.ok(existsSync(pc), 'the recent one stays')
  // Named again, a swept layer is pulled again (the resolve it gave before is not trusted).
  assert.is(await pathOf(b), pb)
  assert.ok(readFileSync(pb).equals(Buffer.alloc(MiB, 2)))
  assert.is(pulls, 4)
  // Using a file marks it (its mtime, which a VM template's key holds, stays as it was): resolved now, c outlives an older b.
  utimesSync(pb, hoursAgo(3), hoursAgo(3))
  utimesSync(pc, hoursAgo(4), hoursAgo(4))
  const built = statSync(pc).mtimeMs
  await pathOf(c)
  assert.is(statSync(pc).mtimeMs, built)
  assert.equal(store.sweep(MiB, 10 * 60_000), [pb])
}))

test.run()
