/**
 * Egress of a VM: 127.0.0.1:3128 inside is relayed over the VM's second serial port to its
 * proxy, which lets through what the allow-list names (and reports every ask), refuses the
 * rest; many bytes come through within the relay's windows; a VM without egress has no way out;
 * kill leaves nothing of either.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { EgressEvent } from '../../../src/backends/types.js'
import { timed } from '../../support/index.js'
import { assertGone, newBackend, registerLeftoverCheck, run, sh, vmTest } from './helpers.js'

const LIMITS = { cpus: 1, memoryMiB: 256, diskMiB: 64, pids: 64 }

vmTest('egress: allowed through the proxy (8 MiB intact, two at once), refused otherwise and reported; no egress, no way out; kill leaves nothing', timed(150_000, async (defer) => {
  const big = Buffer.alloc(8 * 1024 * 1024)
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff
  const web = createServer((req, res) => { if (req.url === '/big') res.end(big); else res.end(`hello ${req.url ?? ''}\n`) })
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => web.close())
  const port = (web.address() as AddressInfo).port
  const dataDir = mkdtempSync(join(tmpdir(), 'warren-vmegress-'))
  defer(() => rmSync(dataDir, { recursive: true, force: true }))
  const b = await newBackend(dataDir, { egress: { hosts: { 'web.test': `127.0.0.1:${port}` } } })
  defer(() => b.close())

  const h = await b.create({ id: 'eg-a', limits: LIMITS, egress: [`web.test:${port}`] })
  const events: EgressEvent[] = []
  b.onEgress!(h, (e) => events.push(e))
  assert.match(await sh(b, h, 'echo $http_proxy'), /^http:\/\/127\.0\.0\.1:3128/)
  assert.is(await sh(b, h, `wget -q -O - http://web.test:${port}/x`), 'hello /x\n')
  // Two at once over the one port, each whole.
  await sh(b, h, `wget -q -O /tmp/b1 http://web.test:${port}/big & wget -q -O /tmp/b2 http://web.test:${port}/big; wait`)
  const sha = createHash('sha256').update(big).digest('hex')
  assert.is(await sh(b, h, 'sha256sum /tmp/b1 /tmp/b2 | cut -d" " -f1 | sort -u'), `${sha}\n`)
  const refused = await run(b, h, ['sh', '-c', 'wget -q -O - http://other.test/ 2>&1'])
  assert.is.not(refused.exitCode, 0)
  assert.ok(events.some((e) => e.host === 'web.test' && e.port === port && e.allowed))
  assert.ok(events.some((e) => e.host === 'other.test' && !e.allowed), JSON.stringify(events))

  const none = await b.create({ id: 'eg-none', limits: LIMITS })
  assert.is(await sh(b, none, 'echo "[$http_proxy]"'), '[]\n')
  const out = await run(b, none, ['sh', '-c', 'echo GET / | nc 127.0.0.1 3128; echo "rc=$?"'])
  assert.match(out.stdout, /^rc=/, 'the relay refuses: nobody relays for this VM')
  assert.not.match(out.stdout, /HTTP/)

  for (const x of [h, none]) {
    const vm = b.vm(x)!
    await b.kill(x)
    await assertGone(vm)
  }
}))

registerLeftoverCheck()
test.run()
