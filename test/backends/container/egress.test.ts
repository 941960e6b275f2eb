import { mkdtempSync, rmSync } from 'node:fs'
import { connect as netConnect, createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { isInternal } from '../../../src/backends/container/egress-address.js'
import { createEgressRouting, parseEgressRules, startEgressProxy } from '../../../src/backends/container/egress.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'

/** Sends a raw request through the proxy's socket; resolves with everything it answered. */
function through (socketPath: string, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = netConnect(socketPath)
    let out = ''
    s.on('data', (b: Buffer) => { out += b.toString() })
    s.on('error', reject)
    s.on('close', () => resolve(out))
    s.write(raw)
    setTimeout(() => s.end(), 500)
  })
}

test('allow-lists: hosts, *.domains, ports, outside IP literals; anything else (inside addresses too) is BAD_SPEC naming the entry', () => {
  assert.equal(parseEgressRules(['pypi.org', '*.PythonHosted.org', 'example.com:8443', '203.0.113.7:80']), ['pypi.org', '*.pythonhosted.org', 'example.com:8443', '203.0.113.7:80'])
  for (const bad of [['http://pypi.org'], ['*'], ['a..b'], ['host:0'], ['host:99999'], [42], 'pypi.org', ['127.0.0.1:80'], ['localhost'], ['[::1]']]) {
    const err = (() => { try { parseEgressRules(bad as unknown); return undefined } catch (e) { return e } })()
    assert.ok(isWarrenError(err, ErrorCodes.BAD_SPEC), JSON.stringify(bad))
  }
})

test('internal addresses: loopback, private, link-local, CGNAT, unspecified, and their IPv6 forms', () => {
  for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1']) assert.ok(isInternal(a), a)
  for (const a of ['8.8.8.8', '172.32.0.1', '203.0.113.7', '2001:db8::1']) assert.not.ok(isInternal(a), a)
})

test('the proxy forwards what the allow-list names (an operator-pinned inside name too), refuses the rest with 403, and reaches no internal address by name', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-egress-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const web = createServer((s) => {
    s.once('data', (b: Buffer) => {
      const line = b.toString().split('\r\n')[0]
      s.end(`HTTP/1.1 200 OK\r\ncontent-length: ${line!.length + 1}\r\nconnection: close\r\n\r\n${line}\n`)
    })
  })
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => web.close())
  const port = (web.address() as AddressInfo).port
  const proxy = await startEgressProxy(join(dir, 'p.sock'), [`web.test:${port}`, 'sneaky.test'], createEgressRouting({
    hosts: { 'web.test': `127.0.0.1:${port}` },
    lookup: async (name) => name === 'sneaky.test' ? [{ address: '127.0.0.1' }] : []
  }))
  defer(() => proxy.close())

  // Absolute-form: passed on in origin form, with connection: close.
  const plain = await through(proxy.socketPath, `GET http://web.test:${port}/x?y=1 HTTP/1.1\r\nhost: web.test\r\nproxy-connection: keep-alive\r\n\r\n`)
  assert.match(plain, /200 OK[\s\S]*GET \/x\?y=1 HTTP\/1.1/)
  // CONNECT: a tunnel.
  const tunnel = await through(proxy.socketPath, `CONNECT web.test:${port} HTTP/1.1\r\n\r\nGET /t HTTP/1.0\r\n\r\n`)
  assert.match(tunnel, /^HTTP\/1.1 200 Connection Established\r\n\r\nHTTP\/1.1 200 OK[\s\S]*GET \/t HTTP\/1.0/)
  // Not in the list: another port, another address.
  assert.match(await through(proxy.socketPath, `CONNECT web.test:${port + 1} HTTP/1.1\r\n\r\n`), /^HTTP\/1.1 403[\s\S]*not in this sandbox's egress allow-list/)
  assert.match(await through(proxy.socketPath, `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`), /^HTTP\/1.1 403/)
  assert.match(await through(proxy.socketPath, `GET http://127.0.0.2:${port}/ HTTP/1.1\r\n\r\n`), /^HTTP\/1.1 403/)
  // Named in the list, but resolving to loopback: refused.
  assert.match(await through(proxy.socketPath, 'GET http://sneaky.test/ HTTP/1.1\r\n\r\n'), /^HTTP\/1.1 403[\s\S]*internal address/)
  // Garbage is a 400, never a crash.
  assert.match(await through(proxy.socketPath, 'HELLO\r\n\r\n'), /^HTTP\/1.1 400/)
  assert.match(await through(proxy.socketPath, 'GET https://example.com/ HTTP/1.1\r\n\r\n'), /^HTTP\/1.1 400/)
}))

test('a malformed pinned name is refused when the node sets up its routing, before any sandbox asks for egress', () => {
  const malformed: Array<Record<string, string>> = [{ 'mirror.test': 'nowhere' }, { 'mirror.test': '10.0.0.5' }, { '10.0.0.5': '10.0.0.5:80' }]
  for (const hosts of malformed) {
    let err: unknown
    try { createEgressRouting({ hosts }) } catch (e) { err = e }
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), JSON.stringify(hosts))
  }
  assert.is(createEgressRouting({ hosts: { 'mirror.test': '10.0.0.5:3141' } }).pinned.get('mirror.test')?.port, 3141)
})

test.run()
