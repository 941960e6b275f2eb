/**
 * Links over TLS: a link server on an HTTPS port (createPortServer), clients that trust its CA,
 * clients that do not (refused at once, naming TLS, not retried), a plain ws:// client at the
 * TLS port (told to use wss://), and the certificate checks of `loadServerTls`.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { readFileSync } from 'node:fs'
import { request as httpsRequest } from 'node:https'
import { connect as connectTcp, type AddressInfo } from 'node:net'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { createLinkClient, createLinkServer, createPortServer, loadCa, loadServerTls, type LinkServer } from '../../src/transport/index.js'
import { makeTestCerts, type TestCerts } from '../support/certs.js'
import { timed } from '../support/index.js'
import { PRINCIPAL, TOKEN } from './helpers.js'

let certs: TestCerts
test.before(() => { certs = makeTestCerts() })
test.after(() => certs.remove())

type Defer = (fn: () => unknown) => void

/** A link server on an HTTPS port of 127.0.0.1 that echoes requests; plain HTTP requests answer 200. */
async function tlsServer (defer: Defer, authTimeoutMs = 3000): Promise<{ server: LinkServer, port: number }> {
  const http = createPortServer(loadServerTls(certs.certFile, certs.keyFile), (_req, res) => { res.writeHead(200); res.end('blob') })
  const server = createLinkServer({
    server: http, authTimeoutMs,
    authenticate: (t) => t === TOKEN ? PRINCIPAL : null,
    handler: { request: (_to, body) => body }
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', () => resolve()))
  defer(async () => { await server.close(); http.closeAllConnections(); await new Promise((resolve) => http.close(resolve)) })
  return { server, port: (http.address() as AddressInfo).port }
}

async function refusal (url: string, ca?: string): Promise<unknown> {
  const client = createLinkClient({ url, token: TOKEN, reconnect: { minDelayMs: 5, maxDelayMs: 20 }, ...(ca !== undefined ? { ca } : {}) })
  try {
    return await client.connect().then(() => undefined, (err: unknown) => err)
  } finally {
    client.close()
  }
}

test('a client trusting the CA links over wss:// and the server names its URL wss://', timed(10_000, async (defer) => {
  const { server, port } = await tlsServer(defer)
  assert.is(server.url, `wss://127.0.0.1:${port}`)
  const client = createLinkClient({ url: server.url, token: TOKEN, ca: certs.ca })
  defer(() => client.close())
  await client.connect()
  assert.equal(await client.request('x', { hello: 'tls' }), { hello: 'tls' })
}))

test('an authenticated TLS link outlives the unauthenticated-connection timeout (admission keys the TCP socket)', timed(10_000, async (defer) => {
  const { server } = await tlsServer(defer, 150)
  const client = createLinkClient({ url: server.url, token: TOKEN, ca: certs.ca })
  defer(() => client.close())
  await client.connect()
  let reconnects = 0
  client.on('reconnect', () => { reconnects++ })
  // Three timeouts' worth: a socket the admission still counted as waiting would be dropped by now.
  await new Promise((resolve) => setTimeout(resolve, 600))
  assert.equal(await client.request('x', 1), 1)
  assert.is(reconnects, 0)
}))

test('a TCP connection that never starts its TLS handshake is dropped at the authentication timeout', timed(10_000, async (defer) => {
  const { port } = await tlsServer(defer, 200)
  const socket = connectTcp(port, '127.0.0.1')
  defer(() => socket.destroy())
  socket.on('error', () => {})
  // The server ends it: the admission counts it from the TCP accept, before any TLS.
  await new Promise<void>((resolve) => socket.once('close', () => resolve()))
}))

test('HTTPS requests on the same port verify against the CA', timed(10_000, async (defer) => {
  const { port } = await tlsServer(defer)
  const body = await new Promise<string>((resolve, reject) => {
    httpsRequest({ host: '127.0.0.1', port, path: '/blobs/x', ca: certs.ca }, (res) => {
      let text = ''
      res.on('data', (b: Buffer) => { text += b.toString() })
      res.on('end', () => resolve(text))
    }).on('error', reject).end()
  })
  assert.is(body, 'blob')
}))

test('a client with the wrong CA, or none, is refused at once with a TLS reason', timed(10_000, async (defer) => {
  const { server } = await tlsServer(defer)
  for (const ca of [readFileSync(certs.wrongCaFile, 'utf8'), undefined]) {
    const err = await refusal(server.url, ca)
    assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED), String(err))
    assert.is((err as WarrenError).details?.reason, 'tls')
    assert.match((err as Error).message, /not trusted/)
    assert.match(String((err as WarrenError).details?.cause), /CERT|SIGNATURE|ISSUER/)
  }
}))

test('a plain ws:// client at the TLS port is told to use wss://', timed(10_000, async (defer) => {
  const { port } = await tlsServer(defer)
  const err = await refusal(`ws://127.0.0.1:${port}`)
  assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED), String(err))
  assert.is((err as WarrenError).details?.cause, 'TLS_REQUIRED')
  assert.match((err as Error).message, /wss:\/\/127\.0\.0\.1/)
}))

test('a wss:// client at a plain port is refused naming TLS, not retried', timed(10_000, async (defer) => {
  const server = createLinkServer({ host: '127.0.0.1', authenticate: () => PRINCIPAL })
  await server.listen()
  defer(() => server.close())
  const err = await refusal(server.url.replace('ws:', 'wss:'), certs.ca)
  assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED), String(err))
  assert.is((err as WarrenError).details?.reason, 'tls')
}))

test('loadServerTls names the file at fault: unreadable, not PEM, a key of another certificate', () => {
  const cases: Array<[string, string, string, RegExp]> = [
    [certs.dir + '/missing.pem', certs.keyFile, 'tls-cert', /cannot read the certificate/],
    [certs.certFile, certs.dir + '/missing.key', 'tls-key', /cannot read the key/],
    [certs.dir + '/server.ext', certs.keyFile, 'tls-cert', /no PEM/],
    [certs.certFile, certs.otherKeyFile, 'tls-key', /does not belong/]
  ]
  for (const [cert, key, field, message] of cases) {
    try {
      loadServerTls(cert, key)
      assert.unreachable(`${cert} ${key} accepted`)
    } catch (err) {
      assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
      assert.is((err as WarrenError).details?.field, field)
      assert.match((err as Error).message, message)
    }
  }
  assert.ok(loadServerTls(certs.certFile, certs.keyFile).cert.includes('BEGIN CERTIFICATE'))
})

test('loadCa takes PEM text or a path, and refuses a path that is not one', () => {
  assert.is(loadCa(certs.caFile), certs.ca)
  assert.is(loadCa(certs.ca), certs.ca)
  try {
    loadCa('/nonexistent/ca.pem')
    assert.unreachable('a missing CA file accepted')
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT))
    assert.is((err as WarrenError).details?.field, 'ca')
  }
})

test.run()
