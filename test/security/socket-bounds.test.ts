/**
 * Finding: a crowd of *working* sockets. The bound on unauthenticated sockets (idle-sockets.test)
 * let go of a socket once it had sent a plain HTTP request, so one address could hold thousands
 * of `GET /ui/app.js` it never read (3,000 seen held for 30 s on `warren up`, each with its
 * response buffered) until the control plane ran out of open files; and one key could open
 * sessions without end, each buffering up to 64 MiB for a client that does not read.
 * Now: sockets per address are bounded whatever they became, a plain HTTP reader that stops
 * reading is cut off, and a key's sessions are bounded (WARREN_ERR_QUOTA).
 */
import { connect as tcpConnect, type Socket } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode, type ControlPlane } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect } from '../../src/sdk/index.js'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'
import { httpGet } from '../web/prom-text.js'
import { timed, waitFor } from '../support/index.js'

const PER_ADDRESS = 16

async function cluster (defer: (fn: () => unknown) => void, options: Parameters<typeof startTestControlPlane>[0] = {}): Promise<ControlPlane> {
  const cp = await startTestControlPlane({ link: { maxSocketsPerAddress: PER_ADDRESS, httpIdleMs: 1000 }, ...options })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'sb-bounds', functionsDir })
  defer(() => node.close())
  return cp
}

/**
 * `n` sockets from `from`, each sending a request for `path` and not reading the answer (yet).
 * `stalled`: a POST whose body stops after its first bytes, so its exchange never ends (an
 * unread answer alone would end in the loopback's large socket buffers).
 */
async function unreadGets (defer: (fn: () => unknown) => void, port: number, n: number, from: string, path: string, stalled = false): Promise<Socket[]> {
  const sockets: Socket[] = []
  defer(() => { for (const s of sockets) s.destroy() })
  await Promise.all(Array.from({ length: n }, () => new Promise<void>((resolve) => {
    const s = tcpConnect({ host: '127.0.0.1', port, localAddress: from })
    sockets.push(s)
    s.on('error', () => {})
    s.pause()
    const head = stalled ? `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nabc` : `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`
    s.once('connect', () => { s.write(head); resolve() })
  })))
  return sockets
}

/** Reads each socket to its end: how many were answered, and how many ended with not a byte (refused). */
async function readAll (sockets: Socket[]): Promise<{ answered: number, refused: number }> {
  const got = await Promise.all(sockets.map((s) => new Promise<number>((resolve) => {
    let n = 0
    s.on('data', (b: Buffer) => { n += b.length })
    s.once('close', () => resolve(n))
    s.resume()
  })))
  return { answered: got.filter((n) => n > 0).length, refused: got.filter((n) => n === 0).length }
}

/** One GET of /healthz from `from`: true when answered, false when the socket was refused. */
async function servedFrom (port: number, from: string): Promise<boolean> {
  const [s] = await unreadGets(() => {}, port, 1, from, '/healthz')
  return (await readAll([s!])).answered === 1
}

test('an address holding maxSocketsPerAddress sockets has its next ones refused; other addresses are served', timed(30_000, async (defer) => {
  const cp = await cluster(defer, { link: { maxSocketsPerAddress: PER_ADDRESS, httpIdleMs: 60_000 } })
  const port = Number(new URL(cp.url).port)
  const crowd = await unreadGets(defer, port, PER_ADDRESS * 4, '127.0.0.2', '/ui/', true)
  // The address holds PER_ADDRESS exchanges (their idle limit is a minute here): one more is refused.
  assert.is(await servedFrom(port, '127.0.0.2'), false, 'a newcomer past the bound is refused')
  // Another address: the page, /healthz and a real client with a command.
  assert.is((await httpGet(cp.url, '/healthz')).status, 200)
  const token = await cp.createToken('tenant-a', [...ALL_SCOPES])
  const client = await connect({ url: cp.url, token })
  defer(() => client.close())
  const sb = await client.create({})
  assert.is((await sb.exec(['js', 'console.log(6*7)'])).stdout, '42\n')
  // Read at last: exactly PER_ADDRESS were answered (405: the page takes no POST), every later one refused unanswered.
  assert.equal(await readAll(crowd), { answered: PER_ADDRESS, refused: PER_ADDRESS * 3 })
}))

test('a plain HTTP exchange that stops moving (a request body that stops coming) is cut off after httpIdleMs; its slot is free again', timed(30_000, async (defer) => {
  const cp = await cluster(defer)
  const port = Number(new URL(cp.url).port)
  // The page's script is ~100 KB: more than the socket buffers take at once from a paused reader.
  await unreadGets(defer, port, PER_ADDRESS, '127.0.0.3', '/ui/', true)
  // Without the idle limit those PER_ADDRESS would hold the address's every slot for good.
  await waitFor(() => servedFrom(port, '127.0.0.3'), 20_000, 'the stalled readers cut off and the address served again')
}))

test('a key holding maxSessionsPerKey sessions: the next client is refused with WARREN_ERR_QUOTA naming the key; another key is not', timed(30_000, async (defer) => {
  const cp = await cluster(defer, { maxSessionsPerKey: 3 })
  const token = await cp.createToken('tenant-a', [...ALL_SCOPES])
  const other = await cp.createToken('tenant-b', [...ALL_SCOPES])
  const clients = await Promise.all([0, 1, 2].map(() => connect({ url: cp.url, token })))
  defer(() => Promise.all(clients.map((c) => c.close())))
  for (const c of clients) assert.ok(Array.isArray(await c.list()))
  const fourth = await connect({ url: cp.url, token }).then(async (c) => {
    defer(() => c.close())
    return await c.list()
  }).catch((e: unknown) => e)
  assert.ok(isWarrenError(fourth, ErrorCodes.QUOTA), String(fourth))
  assert.match((fourth as Error).message, /sessions open/)
  // Another key is not held back by this one.
  const b = await connect({ url: cp.url, token: other })
  defer(() => b.close())
  assert.ok(Array.isArray(await b.list()))
  // A closed session frees its place.
  await clients[0]!.close()
  await waitFor(async () => {
    const c = await connect({ url: cp.url, token }).catch(() => undefined)
    if (c === undefined) return false
    const ok = await c.list().then(() => true, () => false)
    if (!ok) await c.close()
    else defer(() => c.close())
    return ok
  }, 10_000, 'a place freed')
}))

test.run()
