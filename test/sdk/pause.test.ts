/**
 * Pause and resume through the SDK against a real cluster (container sandboxes frozen by their
 * cgroup): a frozen loop does not advance, what a paused sandbox refuses and names, kill,
 * pausedTtl, a paused sandbox's CPU free for another create, tenant isolation, bad fields,
 * deterministic specs, and the node's snapshot pushed to the control plane's blob store.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode, type ClientRequest, type ControlPlane, type NodeOptions, type SandboxMessage } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type WarrenError } from '../../src/errors.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { sleep, timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`pause tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

interface Cluster { cp: ControlPlane, client: Client, dir: string }

/** A control plane (with a data dir: a blob store), one container node here, and a client of tenant `t`. */
async function cluster (defer: (fn: () => unknown) => void, node: Partial<NodeOptions> = {}): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-pause-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const n = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'pz', functionsDir, dataDir: join(dir, 'node'), containerPool: { max: 0 }, ...node })
  defer(() => n.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { cp, client, dir }
}

async function refusal (p: Promise<unknown>): Promise<WarrenError> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err), `expected a refusal, got ${String(err)}`)
  return err
}

/** A counting loop's output, as the lines it printed so far. */
function counter (sb: Sandbox): { lines: () => number[], stop: () => Promise<void> } {
  const handle = sb.spawn('i=0; while true; do i=$((i+1)); echo $i; sleep 0.05; done')
  let text = ''
  const reading = (async () => { for await (const c of handle) text += new TextDecoder().decode(c.data) })().catch(() => {})
  return {
    lines: () => text.split('\n').filter((l) => l !== '').map(Number),
    stop: async () => { await handle.kill().catch(() => {}); await reading }
  }
}

ctest('a paused sandbox does not advance; exec and files are SANDBOX_PAUSED naming state paused; info, list and notices say paused; resume goes on where it stopped', timed(90_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create({ backend: 'container', limits: { cpus: 0.5, memoryMiB: 256 } })
  defer(() => sb.kill())
  const loop = counter(sb)
  defer(() => loop.stop())
  await waitFor(() => loop.lines().length >= 3, 10_000, 'the loop counting')

  const view = await sb.pause()
  assert.is(view.state, 'paused')
  assert.is((await sb.pause()).state, 'paused', 'pausing again is not an error')
  assert.is((await sb.info()).state, 'paused', 'the directory says so at once')
  assert.equal((await client.list({ state: 'paused' })).map((v) => v.id), [sb.id])
  await waitFor(() => sb.state === 'paused', 5000, 'the handle hears it')

  await sleep(300) // what the loop wrote just before it froze has arrived
  const frozenAt = loop.lines().length
  await sleep(1000)
  assert.is(loop.lines().length, frozenAt, 'nothing printed while paused')

  const exec = await refusal(sb.exec('true'))
  assert.is(exec.code, ErrorCodes.SANDBOX_PAUSED)
  assert.equal(exec.details, { id: sb.id, state: 'paused' })
  const file = await refusal(sb.files.read('/etc/hostname'))
  assert.is(file.code, ErrorCodes.SANDBOX_PAUSED)
  assert.is(file.details?.state, 'paused')

  assert.is((await sb.resume()).state, 'ready')
  assert.is((await sb.resume()).state, 'ready', 'resuming a running sandbox is not an error')
  await waitFor(() => loop.lines().length > frozenAt + 2, 10_000, 'counting again')
  const lines = loop.lines()
  assert.equal(lines, lines.map((_, i) => i + 1), 'it went on where it stopped: no number skipped')
  assert.is((await sb.exec('echo ok')).stdout, 'ok\n')
}))

ctest('kill ends a paused sandbox; pausedTtl false moves expiresAt on by the paused time, the default does not', timed(90_000, async (defer) => {
  const { client } = await cluster(defer)
  const [kept, counted] = await Promise.all([
    client.create({ backend: 'container', ttlMs: 600_000, pausedTtl: false, limits: { cpus: 0.5, memoryMiB: 128 } }),
    client.create({ backend: 'container', ttlMs: 600_000, limits: { cpus: 0.5, memoryMiB: 128 } })
  ])
  defer(() => client.kill([kept.id, counted.id]))
  const pauseAsked = Date.now()
  // The node's clock of the sandbox's end, which the pause answers with (and the directory takes).
  const [pk, pc] = await Promise.all([kept.pause(), counted.pause()])
  const pauseDone = Date.now()
  const before = { kept: pk.expiresAt, counted: pc.expiresAt }
  await sleep(1000)
  const resumeAsked = Date.now()
  const [k, c] = await Promise.all([kept.resume(), counted.resume()])
  const resumeDone = Date.now()
  const moved = k.expiresAt - before.kept
  assert.ok(moved >= resumeAsked - pauseDone && moved <= resumeDone - pauseAsked, `moved on by ${moved} ms; paused ${resumeAsked - pauseDone} to ${resumeDone - pauseAsked}`)
  assert.is((await kept.info()).expiresAt, k.expiresAt, 'the directory has the new end')
  assert.is(c.expiresAt, before.counted, 'the TTL kept counting')

  await kept.pause()
  await kept.kill()
  assert.is(kept.state, 'gone')
  assert.is((await kept.info()).reason, 'killed')
}))

ctest('a paused sandbox\'s CPU is free: a node with room for one takes another while it is paused; the resume is not refused', timed(90_000, async (defer) => {
  const { client } = await cluster(defer, { capacity: { cpus: 1, cpuOvercommit: 1 } })
  const spec = { backend: 'container' as const, limits: { cpus: 1, memoryMiB: 128 } }
  const a = await client.create(spec)
  defer(() => a.kill())
  const full = await refusal(client.create({ ...spec, deadlineMs: 300 }))
  assert.is(full.code, ErrorCodes.NO_CAPACITY)
  await a.pause()
  const b = await client.create(spec)
  defer(() => b.kill())
  assert.is((await b.exec('echo b')).stdout, 'b\n')
  assert.is((await a.resume()).state, 'ready', 'taken back although the node is full')
  assert.is((await a.exec('echo a')).stdout, 'a\n')
  await b.kill()
  await a.kill()
  // Both ended: the node's one CPU is free again, and exactly one.
  const c = await client.create(spec)
  defer(() => c.kill())
  assert.is((await refusal(client.create({ ...spec, deadlineMs: 300 }))).code, ErrorCodes.NO_CAPACITY)
}))

ctest('another tenant\'s id is NOT_FOUND; bad fields are INVALID_ARGUMENT or BAD_SPEC naming them; a function sandbox cannot pause', timed(60_000, async (defer) => {
  const { cp, client } = await cluster(defer)
  const sb = await client.create({ backend: 'container', limits: { cpus: 0.5, memoryMiB: 128 } })
  defer(() => sb.kill())
  const other = await connect({ url: cp.url, token: await cp.createToken('other', [...ALL_SCOPES]) })
  defer(() => other.close())
  for (const type of ['pause', 'resume'] as const) {
    assert.is((await refusal(other.request({ type, id: sb.id }))).code, ErrorCodes.NOT_FOUND, type)
    const missing = await refusal(client.request({ type } as unknown as ClientRequest))
    assert.is(missing.code, ErrorCodes.INVALID_ARGUMENT)
    assert.is(missing.details?.field, 'id')
    assert.is((await refusal(client.request({ type, id: 7 } as unknown as ClientRequest))).details?.field, 'id')
  }
  assert.is((await sb.info()).state, 'ready', 'the other tenant changed nothing')
  const reader = await connect({ url: cp.url, token: await cp.createToken('t', ['sandbox:read']) })
  defer(() => reader.close())
  const forbidden = await refusal(reader.request({ type: 'pause', id: sb.id }))
  assert.is(forbidden.code, ErrorCodes.FORBIDDEN)
  assert.is(forbidden.details?.scope, 'sandbox:exec')

  for (const [field, spec] of [
    ['deterministic.tz', { deterministic: { tz: 'a b' } }],
    ['deterministic.seed', { deterministic: { seed: 2 ** 32 } }],
    ['deterministic.hostname', { deterministic: { hostname: 'no.dots' } }],
    ['pausedTtl', { pausedTtl: 'yes' }]
  ] as const) {
    const err = await refusal(client.create({ backend: 'container', ...spec } as never))
    assert.is(err.code, ErrorCodes.BAD_SPEC)
    assert.is(err.details?.field, field)
  }

  const fn = await client.create({ backend: 'function' })
  defer(() => fn.kill())
  const unsupported = await refusal(fn.pause())
  assert.is(unsupported.code, ErrorCodes.UNSUPPORTED)
  assert.is(unsupported.details?.field, 'backend')
}))

ctest('deterministic: two sandboxes of one deterministic spec print the same hostname, TZ, SOURCE_DATE_EPOCH and seed; a batch shares its drawn seed', timed(90_000, async (defer) => {
  const { client } = await cluster(defer)
  const probe = 'hostname; echo $TZ $SOURCE_DATE_EPOCH $WARREN_SEED $LANG $PYTHONHASHSEED'
  const deterministic = { hostname: 'rollout', tz: 'Europe/Paris', sourceDateEpoch: 1700000000, seed: 1234 }
  const [a, b] = await Promise.all([0, 1].map(() => client.create({ backend: 'container', deterministic, limits: { cpus: 0.5, memoryMiB: 128 } })))
  defer(() => client.kill([a!.id, b!.id]))
  const [ra, rb] = await Promise.all([a!.exec(probe), b!.exec(probe)])
  assert.is(ra!.stdout, 'rollout\nEurope/Paris 1700000000 1234 C.UTF-8 1234\n')
  assert.is(rb!.stdout, ra!.stdout)

  const batch = await client.createMany(2, { backend: 'container', deterministic: true, env: { TZ: 'Asia/Tokyo' }, limits: { cpus: 0.5, memoryMiB: 128 } })
  defer(() => client.kill(batch.map((s) => s.id)))
  const [x, y] = await Promise.all(batch.map((s) => s.exec(probe)))
  assert.match(x!.stdout, /^sandbox\nAsia\/Tokyo 0 \d+ C\.UTF-8 \d+\n$/, 'the spec env wins over the deterministic TZ')
  assert.is(y!.stdout, x!.stdout)
}))

ctest('the node snapshots a sandbox, ready or paused, into the control plane\'s blob store and answers after the push', timed(120_000, async (defer) => {
  const { cp, client, dir } = await cluster(defer)
  const sb = await client.create({ backend: 'container', limits: { cpus: 0.5, memoryMiB: 128 } })
  defer(() => sb.kill())
  await sb.exec('echo hello > /tmp/made-here')
  // The session's snapshot request is built over this; here the sandbox actor is asked directly.
  const actor = cp.system.refFor<SandboxMessage>(`pz/sb-${sb.id}`)!
  const cut = await actor.ask<{ layer: string, bytes: number, flattened: boolean }>({ type: 'snapshot' }, { timeoutMs: 60_000 })
  assert.match(cut.layer, /^sha256:[0-9a-f]{64}$/)
  assert.is(cut.flattened, false)
  const stored = findBlob(join(dir, 'cp'), cut.layer.slice('sha256:'.length))
  assert.ok(stored !== undefined, 'the layer is in the blob store')
  assert.is(statSync(stored).size, cut.bytes)

  await sb.pause()
  const paused = await actor.ask<{ layer: string }>({ type: 'snapshot', flatten: true }, { timeoutMs: 60_000 })
  assert.ok(findBlob(join(dir, 'cp'), paused.layer.slice('sha256:'.length)) !== undefined)
  assert.is((await sb.info()).state, 'paused', 'still paused after its snapshot')
  await sb.resume()
  assert.is((await sb.exec('cat /tmp/made-here')).stdout, 'hello\n')
}))

/** The file of blob `hex` under the control plane's data dir. */
function findBlob (root: string, hex: string): string | undefined {
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const p = join(root, entry.name)
    if (entry.isDirectory()) { const found = findBlob(p, hex); if (found !== undefined) return found } else if (entry.name === hex && existsSync(p)) return p
  }
  return undefined
}

test.run()
