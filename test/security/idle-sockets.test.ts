/**
 * Finding 3: locked out by idle sockets. A tenant (or anyone who can reach the control port)
 * opens thousands of connections and never authenticates on them: some finish the WebSocket
 * upgrade and sit idle, some never finish the upgrade request (slowloris). A real client must
 * still connect and run a command within 2 s, and idle sockets must not be held for long.
 */
import { connect as tcpConnect, type Socket } from 'node:net'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode, type ControlPlane } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { transportDefaults } from '../../src/transport/index.js'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'
import { timed, waitFor } from '../support/index.js'

/** A control plane and one function node in this process. */
async function cluster (defer: (fn: () => unknown) => void): Promise<ControlPlane> {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'sec3', functionsDir })
  defer(() => node.close())
  return cp
}

interface Crowd {
  sockets: Socket[]
  /** How many the server has closed so far. */
  readonly closed: number
  /**
   * Keeps the pressure up while `work` runs, as an attacker repeating the attack would: 50 more
   * idle sockets every 100 ms (at most `extra` in all), so slots the server frees are taken again.
   */
  during<T> (work: Promise<T>, extra?: number): Promise<T>
}

/**
 * Opens `n` raw TCP connections to the control port from the given local addresses, in turn.
 * The first half send half a request head (slowloris); the second half, and any opened later,
 * complete a WebSocket upgrade and then send nothing: the freshest sockets are the ones that
 * count against the server's bound, as they would in an attack repeated every few seconds.
 */
async function crowd (defer: (fn: () => unknown) => void, port: number, n: number, from: string[]): Promise<Crowd> {
  const sockets: Socket[] = []
  let closed = 0
  defer(() => { for (const s of sockets) s.destroy() })
  const head = (i: number): string => i >= n / 2
    ? `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${Buffer.from(`idle-socket-${String(i % 10_000).padStart(4, '0')}`).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`
    : `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n`
  const open = (count: number): Promise<void[]> => Promise.all(Array.from({ length: count }, () => new Promise<void>((resolve) => {
    const i = sockets.length
    const s = tcpConnect({ host: '127.0.0.1', port, localAddress: from[i % from.length]! })
    sockets.push(s)
    s.on('error', () => {})
    // Read (and ignore) what the server says, so its close is seen.
    s.resume()
    s.once('close', () => { closed++; resolve() })
    s.once('connect', () => { s.write(head(i)); resolve() })
  })))
  for (let at = 0; at < n; at += 250) await open(Math.min(250, n - at))
  return {
    sockets,
    get closed () { return closed },
    async during (work, extra = 3000) {
      let done = false
      const pressure = (async () => {
        for (let sent = 0; !done && sent < extra; sent += 50) {
          await open(50)
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      })()
      try { return await work } finally { done = true; await pressure }
    }
  }
}

/** A real client connects, creates a function sandbox and runs a command; resolves with the time it took. */
async function realClient (defer: (fn: () => unknown) => void, cp: ControlPlane, token: string): Promise<number> {
  const started = performance.now()
  const client = await connect({ url: cp.url, token })
  defer(() => client.close())
  const sb = await client.create({})
  const r = await sb.exec(['js', 'console.log(6*7)'])
  assert.is(r.stdout, '42\n')
  return performance.now() - started
}

const loopbacks = (first: number, count: number): string[] => Array.from({ length: count }, (_, i) => `127.0.${Math.floor((first + i) / 250)}.${(first + i) % 250 + 1}`)

test('5,000 idle unauthenticated sockets from 40 loopback addresses: a real client connects and runs a command within 2 s', timed(60_000, async (defer) => {
  const cp = await cluster(defer)
  const token = await cp.createToken('tenant-a', [...ALL_SCOPES])
  const port = Number(new URL(cp.url).port)
  const idle = await crowd(defer, port, 5000, loopbacks(1, 40))
  const ms = await idle.during(realClient(defer, cp, token))
  assert.ok(ms < 2000, `the real client took ${Math.round(ms)} ms`)
  await waitFor(() => idle.sockets.length - idle.closed <= transportDefaults.maxUnauthenticated, 10_000, 'the global bound')
}))

test('5,000 idle sockets from the client\'s own address: the per-address bound holds and the real client still gets in within 2 s', timed(60_000, async (defer) => {
  const cp = await cluster(defer)
  const token = await cp.createToken('tenant-a', [...ALL_SCOPES])
  const port = Number(new URL(cp.url).port)
  const idle = await crowd(defer, port, 5000, ['127.0.0.1'])
  // The server closes all but the newest few of one address (waiting on the closes, not on time).
  await waitFor(() => idle.sockets.length - idle.closed <= transportDefaults.maxUnauthenticatedPerAddress, 10_000, 'the per-address bound')
  const ms = await idle.during(realClient(defer, cp, token))
  assert.ok(ms < 2000, `the real client took ${Math.round(ms)} ms`)
}))

test('an idle socket, upgraded or not, is closed once the time to authenticate is over', timed(30_000, async (defer) => {
  const cp = await cluster(defer)
  const port = Number(new URL(cp.url).port)
  const started = performance.now()
  const idle = await crowd(defer, port, 20, ['127.0.0.1'])
  await waitFor(() => idle.closed === 20, 20_000, 'every idle socket closed')
  const ms = performance.now() - started
  assert.ok(ms < transportDefaults.authTimeoutMs + 2000, `closed after ${Math.round(ms)} ms`)
  assert.ok(transportDefaults.authTimeoutMs <= 3000, `${transportDefaults.authTimeoutMs} ms to authenticate`)
}))

test.run()
