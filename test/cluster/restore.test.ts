/**
 * Restore through the SDK against a real cluster of two `warren node` child processes with
 * container sandboxes: the node running a sandbox is killed with SIGKILL and so is the
 * sandbox's init, so the machine is lost; once its record is `lost`, a restore makes it again
 * under its id on the other node — from its trajectory's header with every step applied again,
 * or from the snapshot cut in the middle with only the steps after it — with the files the
 * steps made (checked by sha256), and its trajectory goes on without a step twice.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pack } from 'tar-stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, type ControlPlane, type Step } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane, type NodeChild } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container restore tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

type Defer = (fn: () => unknown) => void
const SPEC = { backend: 'container' as const, deterministic: true as const, limits: { memoryMiB: 128, cpus: 0.5, diskMiB: 512 } }
const BIG = Buffer.from(Array.from({ length: 90 * 1024 }, (_, i) => (i * 17 + 3) % 253))
const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex')

async function tarOf (files: Record<string, string>): Promise<Buffer> {
  const p = pack()
  for (const [name, body] of Object.entries(files)) p.entry({ name, mode: 0o644, mtime: new Date(0) }, body)
  p.finalize()
  const chunks: Buffer[] = []
  for await (const c of p) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

interface Cluster { cp: ControlPlane, client: Client, nodes: Array<{ child: NodeChild, dataDir: string }> }

/** A control plane with a blob store and two container nodes as child processes; a killed node is started again at the end to reclaim what it left. */
async function cluster (defer: Defer, prefix: string): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-restore-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const nodes: Cluster['nodes'] = []
  for (const n of ['a', 'b']) {
    const nodeId = `${prefix}-${n}`
    const dataDir = join(dir, nodeId)
    const entry = { child: await spawnNode(cp, nodeId, dataDir), dataDir }
    nodes.push(entry)
    defer(async () => {
      if (entry.child.proc.exitCode === null && entry.child.proc.signalCode === null) { await entry.child.kill(); return }
      // Killed by the test: a new agent on its data dir reclaims what the dead one left (cgroups, directories).
      const again = await spawnNode(cp, nodeId, dataDir).catch(() => undefined)
      await again?.kill()
    })
  }
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { cp, client, nodes }
}

/** Every step stored so far (a page at a time). */
async function stored (c: Client, id: string): Promise<Step[]> {
  const steps: Step[] = []
  for await (const s of c.steps(id)) steps.push(s)
  return steps
}

/** Waits until the store holds `n` steps of the sandbox, each final (its commands ended). */
async function storedAll (c: Client, id: string, n: number): Promise<Step[]> {
  return await waitFor(async () => {
    const steps = await stored(c, id)
    return steps.length === n && steps.every((s) => s.kind !== 'exec' || s.endedAt !== undefined) ? steps : undefined
  }, 15_000, `${n} final steps of ${id} stored`)
}

/** Kills the sandbox's node and its init with SIGKILL (the machine is lost), and waits for its record to say so. */
async function loseMachine (c: Cluster, sb: Sandbox): Promise<string> {
  const view = (await c.client.list()).find((v) => v.id === sb.id)!
  const node = c.nodes.find((n) => n.child.nodeId === view.nodeId)!
  const journal = JSON.parse(readFileSync(join(node.dataDir, 'container', 'journal', `${sb.id}.json`), 'utf8')) as { launched: { pid: number } }
  await node.child.kill('SIGKILL')
  process.kill(journal.launched.pid, 'SIGKILL')
  await waitFor(async () => (await c.client.list({ all: true })).find((v) => v.id === sb.id)?.state === 'lost', 15_000, 'the record lost')
  return view.nodeId
}

const FILES = ['/work/d/big.bin', '/work/d/renamed.txt', '/work/d/by-exec', '/work/tree/x.txt']
const expectedSums = (): string => [
  `${sha(BIG)}  /work/d/big.bin`, `${sha('small\n')}  /work/d/renamed.txt`, `${sha('made by a command\n')}  /work/d/by-exec`, `${sha('in a tar\n')}  /work/tree/x.txt`
].join('\n') + '\n'

/** The first half of the run: 5 steps. */
async function firstHalf (sb: Sandbox): Promise<void> {
  await sb.exec(['sh', '-c', 'cat; echo $FOO; pwd'], { stdin: 'hello\n', env: { FOO: 'bar' }, cwd: '/tmp' })
  await sb.files.mkdir('/work/d', { parents: true })
  await sb.files.write('/work/d/small.txt', 'small\n')
  await sb.files.write('/work/d/big.bin', BIG) // through the blob store
  await sb.exec(['sh', '-c', 'hostname; echo $WARREN_SEED; date -d @$SOURCE_DATE_EPOCH'])
}

/** The second half: 6 steps. */
async function secondHalf (sb: Sandbox): Promise<void> {
  await sb.files.rename('/work/d/small.txt', '/work/d/renamed.txt')
  await sb.exec(['sh', '-c', 'echo made by a command > /work/d/by-exec'], { cwd: '/work/d' })
  await sb.files.write('/work/d/gone.txt', 'soon gone')
  await sb.files.remove('/work/d/gone.txt')
  await sb.files.send('/work/tree', await tarOf({ 'x.txt': 'in a tar\n' }), { format: 'tar' })
  await sb.exec(['wc', '-c'], { stdin: BIG }) // its stdin through the blob store
}

/** After the restore: the same id ready on the other node, the files, and one trajectory numbered on without a step twice. */
async function checkRestored (c: Cluster, sb: Sandbox, lostNode: string, before: Step[]): Promise<void> {
  const view = (await c.client.list()).find((v) => v.id === sb.id)!
  assert.is(view.state, 'ready')
  assert.ok(view.nodeId !== lostNode, `on the other node, not ${lostNode}`)
  const again = await c.client.attach(sb.id)
  assert.is((await again.exec(['sha256sum', ...FILES])).stdout, expectedSums())
  assert.is((await again.exec(['hostname'])).stdout, 'sandbox\n')
  await again.kill()
  const steps = await waitFor(async () => (await c.client.trajectory(sb.id)).complete ? await stored(c.client, sb.id) : undefined, 15_000, 'the trajectory complete')
  assert.equal(steps.map((s) => s.seq), Array.from({ length: before.length + 2 }, (_, i) => i), 'numbered on without a gap')
  assert.equal(steps.slice(0, before.length), before, 'what was recorded before is as it was: no replayed step recorded again')
  assert.equal(steps.slice(before.length).map((s) => s.kind === 'exec' ? s.argv : s.kind), [['sha256sum', ...FILES], ['hostname']])
}

ctest('a sandbox whose machine was lost is restored from its recorded spec with every step applied again: its files, its id, its trajectory going on', timed(240_000, async (defer) => {
  const c = await cluster(defer, 'rs1')
  const sb = await c.client.create(SPEC)
  await firstHalf(sb)
  await secondHalf(sb)
  const before = await storedAll(c.client, sb.id, 11)
  const lost = await loseMachine(c, sb)
  const r = await c.client.restore(sb.id)
  assert.equal([r.sandbox.id, r.snapshot, r.replayed, r.matched, r.divergedAt, r.skipped], [sb.id, null, 11, true, null, []], JSON.stringify({ ...r, sandbox: r.sandbox.id }))
  assert.is(r.sandbox.state, 'ready')
  await checkRestored(c, sb, lost, before)
}))

ctest('with a snapshot in the middle, a restore starts from it and applies only the steps after its step', timed(240_000, async (defer) => {
  const c = await cluster(defer, 'rs2')
  const sb = await c.client.create(SPEC)
  await firstHalf(sb)
  const snap = await sb.snapshot()
  await secondHalf(sb)
  const before = await storedAll(c.client, sb.id, 12)
  assert.equal(before[5], { seq: 5, at: before[5]!.at, kind: 'snapshot', snapshot: snap.id, layer: snap.layers.at(-1)! })
  // Its layer named as an image is not there, as any layer the store lacks: its kind tells no one it exists.
  const named = await c.client.create({ backend: 'container', image: { base: snap.layers.at(-1)! } }).catch((e: unknown) => e)
  assert.ok(isWarrenError(named, ErrorCodes.BAD_SPEC) && named.details?.field === 'image.base', String(named))
  assert.match((named as Error).message, /is not in the blob store/)
  const lost = await loseMachine(c, sb)
  const r = await c.client.restore(sb.id)
  assert.equal([r.sandbox.id, r.snapshot, r.replayed, r.matched, r.divergedAt, r.skipped], [sb.id, snap.id, 6, true, null, []], JSON.stringify({ ...r, sandbox: r.sandbox.id }))
  await checkRestored(c, sb, lost, before)
  // A live sandbox has nothing to restore.
  const live = await c.client.create(SPEC)
  defer(() => live.kill())
  const err = await c.client.restore(live.id).then(() => undefined, (e: unknown) => e as { code?: string, details?: { field?: string } })
  assert.equal([err?.code, err?.details?.field], ['WARREN_ERR_INVALID_ARGUMENT', 'id'])
}))

test.run()
