/**
 * Finding 4 (rules): egress to the host. A tenant names the control plane, the node or the local
 * network in its egress allow-list, in every notation an address has, or names a host whose DNS
 * answer points inside. Rules are refused at create (BAD_SPEC naming the entry); a CONNECT from
 * inside a real container sandbox to a name that resolves to 127.0.0.1 is refused by its proxy.
 */
import { networkInterfaces } from 'node:os'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect } from '../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../cluster/harness.js'
import { timed } from '../support/index.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container part skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

test('every inside address form in an egress rule is refused at create with BAD_SPEC naming the entry', timed(30_000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  const controlPort = new URL(cp.url).port
  const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((a) => !a.internal).map((a) => a.family === 'IPv6' ? `[${a.address.split('%')[0]}]` : a.address)
  const inside = [
    `127.0.0.1:${controlPort}`, '127.1', '0x7f.1', '0177.0.0.1', '2130706433', '127.0.0.1', '127.255.255.254:22',
    '[::1]', `[::1]:${controlPort}`, '[::ffff:127.0.0.1]', '[::ffff:7f00:1]:80', '[0:0:0:0:0:ffff:127.0.0.1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::]',
    'localhost', 'localhost.', 'LOCALHOST', 'LocalHost:8080', 'api.localhost', '*.localhost',
    '10.0.0.1', '10.255.255.255:443', '172.16.5.4', '172.31.0.1', '192.168.1.1', '100.64.0.1', '100.127.255.255',
    '169.254.169.254', '169.254.169.254:80', '[fe80::1]', '[FD00::1]', '[fc00::1]:443', '[fec0::1]',
    '224.0.0.1', '239.255.255.250:1900', '[ff02::1]', '0.0.0.0', '0', '[::]', '255.255.255.255', '240.0.0.1',
    'example.com:0', 'example.com:65536', 'example.com:99999', '*.10.0.0.1', '1.2.3.4.5',
    ...own
  ]
  for (const [i, rule] of inside.entries()) {
    // The bad entry second, so the field names its index.
    const err = await client.create({ backend: 'container', network: { egress: ['pypi.org', rule] } }).catch((e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.BAD_SPEC), `${rule} (#${i}): ${String(err)}`)
    assert.is(err.details?.field, 'network.egress.1', rule)
  }
}))

ctest('from inside a real container sandbox, a CONNECT to a name that resolves to loopback (the control port) is refused', timed(120_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-sec4-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const controlPort = Number(new URL(cp.url).port)
  // A resolver seam standing in for a DNS server that answers with inside addresses.
  const answers: Record<string, string[]> = { 'sneaky.example': ['127.0.0.1'], 'mixed.example': ['93.184.216.34', '127.0.0.1'], 'meta.example': ['169.254.169.254'], 'mapped.example': ['::ffff:127.0.0.1'] }
  const node = await startNode({
    url: cp.url, joinToken: cp.joinToken, nodeId: 'sec4', dataDir: join(dir, 'node'), containerPool: { max: 0 },
    egress: { lookup: async (name) => (answers[name] ?? []).map((address) => ({ address })) }
  })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  const names = Object.keys(answers)
  const sb = await client.create({ backend: 'container', network: { egress: names.map((n) => `${n}:${controlPort}`) } })
  defer(() => sb.kill())
  for (const name of names) {
    const r = await sb.exec(['sh', '-c', `(printf 'CONNECT ${name}:${controlPort} HTTP/1.1\\r\\n\\r\\nGET / HTTP/1.1\\r\\nUpgrade: websocket\\r\\n\\r\\n'; sleep 1) | nc 127.0.0.1 3128`])
    assert.match(r.stdout, /^HTTP\/1.1 403[\s\S]*internal address/, `${name}: ${r.stdout}`)
    const get = await sb.exec(['wget', '-q', '-O', '-', `http://${name}:${controlPort}/`])
    assert.is.not(get.exitCode, 0, name)
    assert.match(get.stderr, /403/, `${name}: ${get.stderr}`)
  }
  // The literal address is not in the allow-list, whatever notation it is written in.
  for (const target of [`127.0.0.1:${controlPort}`, `127.1:${controlPort}`, `[::ffff:127.0.0.1]:${controlPort}`, `2130706433:${controlPort}`]) {
    const r = await sb.exec(['sh', '-c', `(printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n'; sleep 1) | nc 127.0.0.1 3128`])
    assert.match(r.stdout, /^HTTP\/1.1 403/, `${target}: ${r.stdout}`)
  }
}))

test.run()
