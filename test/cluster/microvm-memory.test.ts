/**
 * Memory snapshots through the SDK and a real node: fork({ memory }) of a VM running a counter
 * gives VMs where the counter runs on (same pid) with the files written before; the refusals
 * (a container's memory, limits or another backend over a memory snapshot, a bad flag); a file
 * system snapshot crosses backends (container to VM and back); forks are placed only on a node
 * whose machine is the saved one's.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { microvmUnavailable } from '../../src/backends/microvm/index.js'
import { containerUnavailable, startNode } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import type { WarrenError } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { ALL_SCOPES, startTestControlPlane } from './harness.js'

const GUEST_DIR = '/var/tmp/warren-test-guest'
process.env.WARREN_GUEST_DIR = GUEST_DIR
const why = microvmUnavailable(GUEST_DIR) ?? containerUnavailable()
if (why !== undefined) console.log(`microvm memory cluster tests skipped: ${why}`)
const vtest = why === undefined ? test : test.skip

const LIMITS = { cpus: 1, memoryMiB: 192, diskMiB: 32 }
const COUNTER = '(i=0; while true; do i=$((i+1)); echo $i > /tmp/count.t; mv /tmp/count.t /tmp/count; sleep 0.1; done) >/dev/null 2>&1 </dev/null & echo $!'
const COUNTS = 'a=$(cat /tmp/count); while [ "$(cat /tmp/count)" = "$a" ]; do sleep 0.05; done; cat /tmp/count'

/** The refusal's code and field. */
async function refusal (p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e as WarrenError)
  assert.ok(err !== undefined, 'refused')
  return `${err.code} ${String(err.details?.field)}`
}

vtest('fork({ memory }) of a VM: each fork runs the counter on (same pid) with the files; refusals name memory, limits, backend; a file system snapshot crosses backends', timed(280_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-vmmemc-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  // One shard sees both nodes: placed by room alone, a fork would go to the emptier one, not the source's.
  const cp = await startTestControlPlane({ heartbeatTimeoutMs: 30_000, dataDir: join(dir, 'cp'), shards: 1 })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'vmmem', dataDir: join(dir, 'node'), containerPool: { max: 0 }, microvm: { guestDir: GUEST_DIR, pool: { max: 0 } } })
  defer(() => node.close())
  // A node that says it runs another machine (as a KVM node beside TCG ones would): no memory fork may land there.
  const other = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'vmother', dataDir: join(dir, 'other'), containerPool: { max: 0 }, microvm: { guestDir: GUEST_DIR, pool: { max: 0 } }, capacity: { machines: ['kvm:host:qemu-0.0'] } })
  defer(() => other.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]), requestTimeoutMs: 120_000 })
  defer(() => client.close())

  const sb = await client.create({ backend: 'microvm', limits: LIMITS })
  defer(() => sb.kill())
  const pid = (await sb.exec(COUNTER)).stdout.trim()
  assert.is((await sb.exec('echo before > /root/f && ' + COUNTS)).exitCode, 0)

  // A machine other than the saved one is refused before anything is cut.
  assert.is(await refusal(sb.fork(1, { limits: { memoryMiB: 256 } }, { memory: true })), 'WARREN_ERR_BAD_SPEC limits')
  assert.is(await refusal(sb.fork(1, { backend: 'container' }, { memory: true })), 'WARREN_ERR_BAD_SPEC backend')

  const { snapshot, sandboxes, outcomes } = await sb.fork(2, undefined, { memory: true })
  for (const f of sandboxes) defer(() => f.kill())
  assert.ok(outcomes.every((o) => o.ok), outcomes.map((o) => o.ok ? 'ok' : `${o.error.code}: ${o.error.message}`).join('; '))
  assert.is(snapshot.memory, true)
  assert.equal(await Promise.all(sandboxes.map(async (f) => (await f.info()).nodeId)), ['vmmem', 'vmmem'], 'placed on the node of the saved machine')
  for (const f of sandboxes) {
    assert.is((await f.exec(['hostname'])).stdout, `${f.id}\n`)
    assert.is((await f.exec(['cat', '/root/f'])).stdout, 'before\n')
    const r = await f.exec(`kill -0 ${pid} && ${COUNTS}`)
    assert.is(r.exitCode, 0, `the counter (pid ${pid}) runs on in ${f.id}: ${r.stderr}`)
  }
  // The source runs on too.
  assert.is((await sb.exec(`kill -0 ${pid} && ${COUNTS}`)).exitCode, 0)
  // A create from the memory snapshot: its backend and limits are the saved machine's.
  assert.is(await refusal(client.create({ snapshot: snapshot.id, backend: 'container' })), 'WARREN_ERR_BAD_SPEC backend')
  for (const f of sandboxes) await f.kill()

  // A container cannot save memory; its file system snapshot starts a VM, and the VM's a container.
  const c = await client.create({ backend: 'container' })
  defer(() => c.kill())
  assert.is(await refusal(c.snapshot({ memory: true })), 'WARREN_ERR_UNSUPPORTED memory')
  assert.is((await c.exec('echo from-container > /root/c')).exitCode, 0)
  const csnap = await c.snapshot()
  const vm = await client.create({ snapshot: csnap.id, backend: 'microvm', limits: LIMITS })
  defer(() => vm.kill())
  assert.is((await vm.exec(['cat', '/root/c'])).stdout, 'from-container\n')
  assert.match((await vm.exec(['uname', '-r'])).stdout, /-cloud-amd64\n$/, 'a VM')
  assert.is((await vm.exec('echo from-vm > /root/v')).exitCode, 0)
  const vsnap = await vm.snapshot()
  const back = await client.create({ snapshot: vsnap.id, backend: 'container' })
  defer(() => back.kill())
  assert.is((await back.exec('cat /root/c /root/v')).stdout, 'from-container\nfrom-vm\n')
  for (const x of [back, vm, c, sb]) await x.kill()
}))

test.run()
