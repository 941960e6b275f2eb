/**
 * Replay through the SDK against a real cluster with container sandboxes: a deterministic
 * trajectory (commands with stdin, env and cwd; files written inline and through the blob store;
 * a mkdir, rename, remove and a tar; the hostname, SOURCE_DATE_EPOCH and WARREN_SEED) replays
 * with no divergence in a fresh sandbox that ends up with the same files; a recorded output
 * changed in the store is the divergence, named by its seq with what was expected and what
 * came; `compare: 'exit'` passes over an output change but not an exit change; `upTo` stops
 * there; another tenant, an unknown id and garbage fields are refused; a client's `unrecorded`
 * changes nothing.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pack } from 'tar-stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, encodeValue, ReplayDefaults, startNode, TrajectoryStore, type ControlPlane, type ExecStep, type Step } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError, type ErrorCode } from '../../src/errors.js'
import { connect, type Client, type Sandbox } from '../../src/sdk/index.js'
import { openState } from '../../src/state/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container replay tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

type Defer = (fn: () => unknown) => void
const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex')
const SPEC = { backend: 'container' as const, deterministic: true as const, limits: { memoryMiB: 128, cpus: 0.5, diskMiB: 512 } }
/** 100 KiB that are the same every run: more than a step keeps inline, so they go through the blob store. */
const BIG = Buffer.from(Array.from({ length: 100 * 1024 }, (_, i) => (i * 31 + 7) % 251))

async function tarOf (files: Record<string, string>): Promise<Buffer> {
  const p = pack()
  for (const [name, body] of Object.entries(files)) p.entry({ name, mode: 0o644, mtime: new Date(0) }, body)
  p.finalize()
  const chunks: Buffer[] = []
  for await (const c of p) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

async function refused (p: Promise<unknown>, code: ErrorCode, field?: string): Promise<void> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code), `expected ${code}, got ${String(err)}`)
  if (field !== undefined) assert.is((err.details as { field?: unknown } | undefined)?.field, field, String(err))
}

interface Cluster { dir: string, cp: ControlPlane, client: Client, other: Client }

async function cluster (defer: Defer, nodeId: string): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-replay-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId, dataDir: join(dir, nodeId), containerPool: { max: 0 } })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const other = await connect({ url: cp.url, token: await cp.createToken('u', [...ALL_SCOPES]) })
  defer(() => other.close())
  return { dir, cp, client, other }
}

/** The files the run leaves, and a command that prints each one's sha256. */
const FILES = ['/work/d/big.bin', '/work/d/renamed.txt', '/work/tree/x.txt', '/work/tree/y.txt']
const sums = async (sb: Sandbox): Promise<string> => (await sb.exec(['sha256sum', ...FILES])).stdout

/** The run a replay applies again: 14 steps, their seqs named below (the test's sha256sum is the 15th). */
async function run (sb: Sandbox): Promise<void> {
  await sb.exec(['sh', '-c', 'cat; echo $FOO; pwd'], { stdin: 'hello\n', env: { FOO: 'bar' }, cwd: '/tmp' }) // 0
  await sb.exec(['hostname']) // 1
  await sb.exec(['sh', '-c', 'date -d @$SOURCE_DATE_EPOCH']) // 2
  await sb.exec(['sh', '-c', 'echo $WARREN_SEED $TZ']) // 3
  await sb.files.mkdir('/work/d', { parents: true }) // 4
  await sb.files.write('/work/d/small.txt', 'small file\n') // 5
  await sb.files.write('/work/d/big.bin', BIG) // 6: through the blob store
  await sb.files.rename('/work/d/small.txt', '/work/d/renamed.txt') // 7
  await sb.exec(['wc', '-c'], { stdin: BIG }) // 8: its stdin through the blob store
  await sb.files.write('/work/d/gone.txt', 'soon gone') // 9
  await sb.files.remove('/work/d/gone.txt') // 10
  await sb.exec(['sh', '-c', 'ls /work/d; exit 3']) // 11
  await sb.files.send('/work/tree', await tarOf({ 'x.txt': 'in a tar\n', 'y.txt': 'another\n' }), { format: 'tar' }) // 12
  await sb.exec(['sh', '-c', 'echo to stderr >&2; cat /work/tree/x.txt'], { cwd: '/work' }) // 13
}

/** Every step of a trajectory, once it is complete. */
async function completed (c: Client, id: string): Promise<Step[]> {
  await waitFor(async () => (await c.trajectory(id)).complete, 15_000, `the trajectory of ${id} complete`)
  const steps: Step[] = []
  for await (const s of c.steps(id)) steps.push(s)
  return steps
}

/** Rewrites a stored step, as a node sending a later record of it would. */
function rewrite (store: TrajectoryStore, sandboxId: string, step: Step): void {
  store.append({ type: 'append', nodeId: 'test', logs: [{ sandboxId, first: 1000, records: [encodeValue({ t: 'step', final: true, step })] }] })
}

ctest('a deterministic run replays with no divergence into the same files; a changed output, a changed exit and upTo are seen as such', timed(240_000, async (defer) => {
  const { dir, client } = await cluster(defer, 'rp1')
  const sb = await client.create({ ...SPEC, labels: { run: 'original' } })
  await run(sb)
  const expectedSums = await sums(sb) // 14
  await sb.kill()
  const steps = await completed(client, sb.id)
  assert.equal(steps.map((s) => s.kind), ['exec', 'exec', 'exec', 'exec', 'mkdir', 'write', 'write', 'rename', 'exec', 'write', 'remove', 'exec', 'upload', 'exec', 'exec'])
  const byKind = (seq: number): Step => steps[seq]!
  const big = byKind(6) as Extract<Step, { kind: 'write' }>
  assert.ok(big.content.blob !== undefined, 'the large file is in the blob store')
  assert.ok((byKind(8) as ExecStep).stdin?.blob !== undefined, `the large stdin too: ${JSON.stringify({ ...(byKind(8) as ExecStep).stdin, data: undefined, head: undefined, tail: undefined })}`)
  assert.is(Buffer.from((byKind(1) as ExecStep).stdout!.data!).toString(), 'sandbox\n')

  const same = await client.replay(sb.id, { spec: { labels: { run: 'replay' } } })
  defer(() => same.sandbox.kill())
  assert.equal([same.divergedAt, same.steps, same.skipped], [null, 15, []], JSON.stringify({ ...same, sandbox: same.sandbox.id }))
  assert.ok(same.sandbox.id !== sb.id)
  assert.equal(same.sandbox.labels, { run: 'replay' })
  assert.is(same.sandbox.state, 'ready')
  assert.is(await sums(same.sandbox), expectedSums, 'the same files, byte for byte')
  assert.is((await same.sandbox.exec(['hostname'])).stdout, 'sandbox\n')
  // The replay's sandbox has a trajectory of its own: the steps it was given.
  await waitFor(async () => (await client.trajectory(same.sandbox.id)).steps.length === 17, 10_000, 'the replay\'s own steps, and the two above')

  // One recorded output changed in the store: the replay names that step, with both outcomes.
  const state = openState(join(dir, 'cp'))
  defer(() => state.close())
  const store = new TrajectoryStore(state.db)
  const hostname = byKind(1) as ExecStep
  const forged = Buffer.from('elsewhere\n')
  rewrite(store, sb.id, { ...hostname, stdout: { bytes: forged.length, sha256: sha(forged), data: forged } })
  const changed = await client.replay(sb.id)
  defer(() => changed.sandbox.kill())
  assert.equal([changed.divergedAt, changed.reason, changed.steps], [1, 'output', 2])
  assert.equal([changed.expected?.exitCode, Buffer.from(changed.expected!.stdout!.head).toString(), changed.expected?.stdout?.sha256], [0, 'elsewhere\n', sha(forged)])
  assert.equal([changed.actual?.exitCode, Buffer.from(changed.actual!.stdout!.head).toString(), changed.actual?.stdout?.bytes, changed.actual?.stdout?.sha256], [0, 'sandbox\n', 8, sha('sandbox\n')])
  assert.is((await changed.sandbox.exec(['ls', '/work'])).exitCode, 1, 'it stopped there: no later step was applied')

  // Comparing exit codes only, the changed output passes; a changed exit code does not.
  const exitOnly = await client.replay(sb.id, { compare: 'exit' })
  defer(() => exitOnly.sandbox.kill())
  assert.equal([exitOnly.divergedAt, exitOnly.steps], [null, 15])
  rewrite(store, sb.id, { ...(byKind(11) as ExecStep), exitCode: 4 })
  const exitChanged = await client.replay(sb.id, { compare: 'exit' })
  defer(() => exitChanged.sandbox.kill())
  assert.equal([exitChanged.divergedAt, exitChanged.reason, exitChanged.expected?.exitCode, exitChanged.actual?.exitCode], [11, 'exit', 4, 3])

  // upTo: the steps up to that seq and no further.
  const upTo = await client.replay(sb.id, { upTo: 5, compare: 'exit' })
  defer(() => upTo.sandbox.kill())
  assert.equal([upTo.divergedAt, upTo.steps], [null, 6])
  assert.is((await upTo.sandbox.exec(['cat', '/work/d/small.txt'])).stdout, 'small file\n')
  assert.is((await upTo.sandbox.exec(['ls', '/work/d'])).stdout, 'small.txt\n', 'nothing after seq 5')
}))

ctest('another tenant\'s trajectory, an unknown id and garbage fields are refused; a client\'s unrecorded is ignored; a step past its time is a timeout', timed(120_000, async (defer) => {
  const { dir, cp, client, other } = await cluster(defer, 'rp2')
  const sb = await client.create(SPEC)
  defer(() => sb.kill())
  // A client sending unrecorded (on the request or in opts) is recorded all the same.
  await client.request({ type: 'exec', id: sb.id, execId: 'forged-1', argv: ['echo', 'seen'], unrecorded: true, opts: { unrecorded: true } } as never)
  await client.request({ type: 'files', id: sb.id, op: 'mkdir', path: '/seen', unrecorded: true } as never)
  const page = await waitFor(async () => { const p = await client.trajectory(sb.id); return p.steps.length === 2 ? p : undefined }, 10_000, 'both steps recorded')
  assert.equal(page.steps.map((s) => s.kind), ['exec', 'mkdir'])

  await refused(other.replay(sb.id), ErrorCodes.NOT_FOUND)
  await refused(other.restore(sb.id), ErrorCodes.NOT_FOUND)
  await refused(client.replay('nosuchsandbox000'), ErrorCodes.NOT_FOUND)
  await refused(client.restore('nosuchsandbox000'), ErrorCodes.NOT_FOUND)
  await refused(client.restore(sb.id), ErrorCodes.INVALID_ARGUMENT, 'id')
  for (const [body, field] of [
    [{ type: 'replay', id: sb.id, upTo: -1 }, 'upTo'], [{ type: 'replay', id: sb.id, upTo: 'all' }, 'upTo'],
    [{ type: 'replay', id: sb.id, compare: 'stdout' }, 'compare'], [{ type: 'replay', id: sb.id, spec: { image: { base: 'busybox' } } }, 'spec.image'],
    [{ type: 'replay', id: sb.id, spec: { ttlMs: -5 } }, 'spec.ttlMs'], [{ type: 'replay', id: sb.id, spec: 3 }, 'spec'], [{ type: 'restore', id: 5 }, 'id']
  ] as const) {
    await refused(client.request(body as never), ErrorCodes.INVALID_ARGUMENT, field)
  }
  // Replay and restore create sandboxes: they need sandbox:create.
  const reader = await connect({ url: cp.url, token: await cp.createToken('t', ['sandbox:read', 'sandbox:exec']) })
  defer(() => reader.close())
  await refused(reader.replay(sb.id), ErrorCodes.FORBIDDEN)
  await refused(reader.restore(sb.id), ErrorCodes.FORBIDDEN)
  // None of the refusals made a sandbox.
  assert.equal((await client.list()).map((v) => v.id), [sb.id])

  // A command that runs past its time (its recorded duration × the factor, at least minStepMs) is killed: a divergence, timeout.
  const state = openState(join(dir, 'cp'))
  defer(() => state.close())
  const echo = page.steps[0] as ExecStep
  rewrite(new TrajectoryStore(state.db), sb.id, { ...echo, argv: ['sleep', '600'], durationMs: 1 })
  const minStepMs = ReplayDefaults.minStepMs
  ReplayDefaults.minStepMs = 1500
  defer(() => { ReplayDefaults.minStepMs = minStepMs })
  const slow = await client.replay(sb.id)
  defer(() => slow.sandbox.kill())
  assert.equal([slow.divergedAt, slow.reason, slow.steps, slow.actual?.reason, slow.expected?.exitCode], [0, 'timeout', 1, 'timeout', 0])
  assert.is((await slow.sandbox.exec(['sh', '-c', 'ps | grep -c "[s]leep 600"'])).stdout, '0\n', 'the overrunning command was killed')
}))

test.run()
