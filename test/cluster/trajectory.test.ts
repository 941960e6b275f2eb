/**
 * Durable trajectories through the SDK against a real cluster with container sandboxes: what a
 * sandbox did reads back byte for byte after it is killed, after the control plane restarts and
 * after its node agent dies mid-run; large outputs live in the blob store; a spent record budget
 * keeps head and tail; the retention sweep forgets; another tenant sees nothing.
 */
import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pack } from 'tar-stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable, startNode, type ControlPlane, type ExecStep, type Step } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { storePaths } from '../../src/images/blob/index.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, functionsDir, spawnNode, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`container trajectory tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex')
const text = (b: Uint8Array | undefined): string => new TextDecoder().decode(b)
type Defer = (fn: () => unknown) => void

function tempDir (defer: Defer): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tj-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

async function client (defer: Defer, cp: ControlPlane, tenant = 't'): Promise<Client> {
  const c = await connect({ url: cp.url, token: await cp.createToken(tenant, [...ALL_SCOPES]) })
  defer(() => c.close())
  return c
}

/** Every step, once the trajectory is complete (the sandbox ended and all of it is stored). */
async function completed (c: Client, id: string): Promise<Step[]> {
  await waitFor(async () => (await c.trajectory(id)).complete, 15_000, `the trajectory of ${id} complete`)
  const steps: Step[] = []
  for await (const s of c.steps(id)) steps.push(s)
  return steps
}

async function tarOf (files: Record<string, string>): Promise<Buffer> {
  const p = pack()
  for (const [name, body] of Object.entries(files)) p.entry({ name, mode: 0o640 }, body)
  p.finalize()
  const chunks: Buffer[] = []
  for await (const c of p) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

async function refused (p: Promise<unknown>, code: string): Promise<void> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, code as never), `expected ${code}, got ${String(err)}`)
}

ctest('read back after kill, a trajectory is what was done: argv, env, cwd, stdin, exits, outputs byte for byte, file changes with their contents', timed(120_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await spawnNode(cp, 'tj1', join(dir, 'node'))
  defer(() => node.kill())
  const c = await client(defer, cp)
  const sb = await c.create({ backend: 'container', labels: { run: 'tj1' } })

  const first = await sb.exec(['sh', '-c', 'cat; echo oops >&2; pwd; echo $FOO; exit 3'], { env: { FOO: 'bar' }, cwd: '/tmp', stdin: 'line one\nline two\n' })
  const piped = sb.spawn(['sh', '-c', 'cat | wc -c'], { openStdin: true })
  await piped.write('abc')
  await piped.write('defg')
  await piped.closeStdin()
  assert.is((await piped.wait()).exitCode, 0)
  const big = await sb.exec(['seq', '1', '40000']) // about 230 KB: more than goes inline
  await sb.files.mkdir('/work/d', { parents: true })
  await sb.files.write('/work/d/a.txt', 'hello file')
  await sb.files.rename('/work/d/a.txt', '/work/d/b.txt')
  const tar = await tarOf({ 'x.txt': 'in a tar', 'y.txt': 'and another' })
  await sb.files.send('/work/tree', tar, { format: 'tar' })
  await sb.files.remove('/work/d', { recursive: true })
  await sb.kill()

  const page = await c.trajectory(sb.id)
  assert.is(page.header?.sandboxId, sb.id)
  assert.is(page.header?.tenant, 't')
  assert.is(page.header?.node, 'tj1')
  assert.equal(page.header?.layers, ['busybox'])
  assert.equal([page.header?.spec.backend, page.header?.spec.labels], ['container', { run: 'tj1' }])
  const steps = await completed(c, sb.id)
  assert.equal(steps.map((s) => s.kind), ['exec', 'exec', 'exec', 'mkdir', 'write', 'rename', 'upload', 'remove'])
  assert.equal(steps.map((s) => s.seq), [0, 1, 2, 3, 4, 5, 6, 7])

  const [e0, e1, e2] = steps as ExecStep[]
  assert.equal([e0!.argv, e0!.env, e0!.cwd, e0!.exitCode], [['sh', '-c', 'cat; echo oops >&2; pwd; echo $FOO; exit 3'], { FOO: 'bar' }, '/tmp', 3])
  assert.is(text(e0!.stdin?.data), 'line one\nline two\n')
  assert.is(e0!.stdout?.sha256, sha(first.stdout))
  assert.is(text(e0!.stdout?.data), 'line one\nline two\n/tmp\nbar\n')
  assert.is(text(e0!.stderr?.data), 'oops\n')
  assert.ok(e0!.endedAt! >= e0!.at && typeof e0!.durationMs === 'number')
  assert.is(text(e1!.stdin?.data), 'abcdefg', 'stdin written in pieces is recorded whole')
  assert.is(text(e1!.stdout?.data), '7\n')
  // The large output went to the blob store before its step shipped.
  assert.is(e2!.stdout?.bytes, Buffer.byteLength(big.stdout))
  assert.is(e2!.stdout?.sha256, sha(big.stdout))
  assert.ok(e2!.stdout?.blob?.startsWith('sha256:') === true && e2!.stdout.data === undefined)
  assert.ok(existsSync(storePaths(join(dir, 'cp', 'blobs'), e2!.stdout!.blob!).blob))
  const fetched = await c.recorded(sb.id, e2!.stdout!)
  assert.is(sha(fetched!), sha(big.stdout), 'trajectory-blob returns every byte')

  assert.equal(steps[3], { seq: 3, at: steps[3]!.at, kind: 'mkdir', path: '/work/d', parents: true })
  const write = steps[4] as Extract<Step, { kind: 'write' }>
  assert.equal([write.path, write.content.bytes, write.content.sha256, text(write.content.data)], ['/work/d/a.txt', 10, sha('hello file'), 'hello file'])
  assert.equal(steps[5], { seq: 5, at: steps[5]!.at, kind: 'rename', from: '/work/d/a.txt', to: '/work/d/b.txt' })
  const upload = steps[6] as Extract<Step, { kind: 'upload' }>
  assert.equal([upload.path, upload.content.bytes, upload.content.sha256], ['/work/tree', tar.length, sha(tar)])
  assert.equal(steps[7], { seq: 7, at: steps[7]!.at, kind: 'remove', path: '/work/d', recursive: true })

  // Another tenant learns nothing: its reads are NOT_FOUND, as for a sandbox that never was.
  const other = await client(defer, cp, 'u')
  await refused(other.trajectory(sb.id), ErrorCodes.NOT_FOUND)
  await refused(other.trajectory('nosuchsandbox00'), ErrorCodes.NOT_FOUND)
  await refused(other.request({ type: 'trajectory-blob', id: sb.id, digest: e2!.stdout!.blob!, offset: 0, length: 10 }), ErrorCodes.NOT_FOUND)
  // The owner reads only the blobs its trajectory references.
  await refused(c.request({ type: 'trajectory-blob', id: sb.id, digest: `sha256:${'0'.repeat(64)}`, offset: 0, length: 10 }), ErrorCodes.NOT_FOUND)
  // Bad fields are refused naming them.
  for (const [body, field] of [
    [{ type: 'trajectory', id: sb.id, fromSeq: -1 }, 'fromSeq'], [{ type: 'trajectory', id: sb.id, limit: 0 }, 'limit'],
    [{ type: 'trajectory-blob', id: sb.id, digest: 'nope', offset: 0, length: 1 }, 'digest'],
    [{ type: 'trajectory-blob', id: sb.id, digest: e2!.stdout!.blob!, offset: 0, length: 4 * 1024 * 1024 }, 'length']
  ] as const) {
    const err = await c.request(body as never).then(() => undefined, (e: unknown) => e)
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT) && err.details?.field === field, `${field}: ${String(err)}`)
  }
}))

ctest('after the control plane restarts on its data dir (its node rejoining), every trajectory is still all there, and a live sandbox goes on numbering', timed(180_000, async (defer) => {
  const dir = tempDir(defer)
  const cp1 = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  let cp1Open = true
  defer(() => cp1Open ? cp1.close() : undefined)
  const node1 = await spawnNode(cp1, 'tj2', join(dir, 'node'))
  defer(() => node1.kill())
  const c1 = await connect({ url: cp1.url, token: await cp1.createToken('t', [...ALL_SCOPES]) })
  const done = await c1.create({ backend: 'container' })
  await done.exec(['sh', '-c', 'echo finished'])
  await done.files.write('/tmp/f', 'kept')
  await done.kill()
  const before = await completed(c1, done.id)
  const live = await c1.create({ backend: 'container' })
  await live.exec(['sh', '-c', 'echo before'])
  assert.is((await live.trajectory()).steps.length, 1)
  await c1.close()

  // The control plane goes, then the node agent dies (its join token is void with a new control plane).
  const port = Number(new URL(cp1.url).port)
  await cp1.close()
  cp1Open = false
  await node1.kill('SIGKILL')
  const cp2 = await startTestControlPlane({ dataDir: join(dir, 'cp'), port })
  defer(() => cp2.close())
  const node2 = await spawnNode(cp2, 'tj2', join(dir, 'node'))
  defer(() => node2.kill())
  const c2 = await client(defer, cp2)

  assert.equal(await completed(c2, done.id), before, 'the ended sandbox\'s trajectory, unchanged')
  const again = await waitFor(async () => await c2.attach(live.id).catch(() => undefined), 15_000, 'the live sandbox re-adopted')
  await waitFor(async () => (await again.info()).state === 'ready', 15_000, 'ready again')
  assert.is((await again.exec(['sh', '-c', 'echo after'])).stdout, 'after\n')
  await again.kill()
  const steps = await completed(c2, live.id)
  assert.equal(steps.map((s) => [s.seq, s.kind === 'exec' ? text(s.stdout?.data) : s.kind]), [[0, 'before\n'], [1, 'after\n']])
}))

ctest('a node agent killed mid-run loses nothing and duplicates nothing: the command it was running outlives it and its step goes on, numbering goes on', timed(180_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const first = await spawnNode(cp, 'tj3', join(dir, 'node'))
  defer(() => first.kill())
  const c = await client(defer, cp)
  const sb = await c.create({ backend: 'container' })
  for (const word of ['one', 'two']) await sb.exec(['echo', word])
  const running = sb.spawn(['sh', '-c', 'echo started; sleep 600'])
  running.wait().catch(() => {})
  const firstChunk = await running[Symbol.asyncIterator]().next()
  assert.is(text(firstChunk.value?.data), 'started\n')

  await first.kill('SIGKILL')
  await waitFor(() => sb.state === 'lost', 15_000, 'lost with its node')
  const second = await spawnNode(cp, 'tj3', join(dir, 'node'))
  defer(() => second.kill())
  await waitFor(() => sb.state === 'ready', 15_000, 'ready again once re-adopted')
  await sb.exec(['echo', 'three'])
  await sb.kill()
  const steps = await completed(c, sb.id) as ExecStep[]
  assert.equal(steps.map((s) => s.seq), [0, 1, 2, 3], 'no gap, no step twice')
  assert.is(new Set(steps.map((s) => s.execId)).size, 4)
  // The resumed step holds the output from the first chunk the client had not acknowledged
  // when the node died: "started" if its ack had not reached the sandbox yet.
  assert.equal(steps.map((s) => text(s.stdout?.data)).filter((_, i) => i !== 2), ['one\n', 'two\n', 'three\n'])
  assert.ok(['', 'started\n'].includes(text(steps[2]!.stdout?.data)), text(steps[2]!.stdout?.data))
  assert.equal(steps[2]!.argv, ['sh', '-c', 'echo started; sleep 600'])
  // It ran on in the sandbox; the restarted node took it up (its output before then reached the
  // client, not the record), and it ended with the sandbox.
  assert.type(steps[2]!.resumedAt, 'number')
  assert.is(steps[2]!.reason, 'killed')
  assert.ok(steps[2]!.endedAt !== undefined)
}))

ctest('past the sandbox\'s record budget, outputs keep their head and tail with the count and the sha256 of every byte', timed(120_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tj4', dataDir: join(dir, 'node'), containerPool: { max: 0 }, trajectory: { maxRecordedBytes: 100_000 } })
  defer(() => node.close())
  const c = await client(defer, cp)
  const sb = await c.create({ backend: 'container' })
  const small = await sb.exec(['seq', '1', '5000']) // ~24 KB: whole
  const large = await sb.exec(['seq', '1', '100000']) // ~589 KB: past the budget
  const after = await sb.exec(['echo', 'still whole'])
  await sb.kill()
  const [s0, s1, s2] = await completed(c, sb.id) as ExecStep[]
  assert.is(text(s0!.stdout?.data), small.stdout)
  const out = s1!.stdout!
  assert.equal([out.bytes, out.sha256, out.data, out.blob], [Buffer.byteLength(large.stdout), sha(large.stdout), undefined, undefined])
  const whole = Buffer.from(large.stdout)
  assert.equal(Buffer.from(out.head!), whole.subarray(0, 32 * 1024))
  assert.equal(Buffer.from(out.tail!), whole.subarray(whole.length - 32 * 1024))
  assert.is(await c.recorded(sb.id, out), undefined, 'not kept whole')
  assert.is(text(s2!.stdout?.data), after.stdout, 'the budget the cut stream held is back for the next')
}))

ctest('a trajectory full to its bound refuses the next command and file change (QUOTA naming trajectory) and holds every step done; a fork goes on', timed(120_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tj7', dataDir: join(dir, 'node'), containerPool: { max: 0 }, trajectory: { maxTrajectoryBytes: 64 * 1024 } })
  defer(() => node.close())
  const c = await client(defer, cp)
  const sb = await c.create({ backend: 'container' })
  const done: string[] = []
  let refusal: unknown
  // ~9 KB of output each, kept whole and inline: the log reaches 64 KiB within a few dozen.
  for (let i = 0; i < 100 && refusal === undefined; i++) {
    try { done.push((await sb.exec(['seq', String(i), '2000'])).stdout) } catch (err) { refusal = err }
  }
  assert.ok(isWarrenError(refusal, ErrorCodes.QUOTA), String(refusal))
  assert.is(refusal.details?.field, 'trajectory')
  assert.ok(done.length >= 3 && done.length < 100, String(done.length))
  const write = await sb.files.write('/tmp/x', 'x').catch((e: unknown) => e)
  assert.ok(isWarrenError(write, ErrorCodes.QUOTA) && write.details?.field === 'trajectory', String(write))
  // A fork is a new sandbox with a trajectory of its own.
  const { sandboxes: [child] } = await sb.fork(1)
  assert.is((await child!.exec(['echo', 'on'])).stdout, 'on\n')
  await child!.kill()
  await sb.kill()
  const steps = (await completed(c, sb.id)).filter((s): s is ExecStep => s.kind === 'exec')
  assert.equal(steps.map((s) => text(s.stdout?.data)), done, 'every command that ran, whole; none of those refused')
}))

ctest('each connection a sandbox asks its egress proxy for is a step: the host, the port, and whether the allow-list let it through', timed(120_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const web = createServer((_req, res) => res.end('out there\n'))
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve))
  defer(() => web.close())
  const port = (web.address() as AddressInfo).port
  const node = await spawnNode(cp, 'tj6', join(dir, 'node'), ['--egress-host', `web.test=127.0.0.1:${port}`])
  defer(() => node.kill())
  const c = await client(defer, cp)
  const sb = await c.create({ backend: 'container', network: { egress: [`web.test:${port}`] } })
  assert.is((await sb.exec(['wget', '-q', '-O', '-', `http://web.test:${port}/`])).stdout, 'out there\n')
  assert.ok((await sb.exec(['wget', '-q', '-O', '-', 'http://elsewhere.test:81/'])).exitCode !== 0, 'refused')
  await sb.kill()
  const egress = (await completed(c, sb.id)).filter((s): s is Extract<Step, { kind: 'egress' }> => s.kind === 'egress')
  assert.equal(egress.map((e) => [e.host, e.port, e.allowed]), [['web.test', port, true], ['elsewhere.test', 81, false]])
}))

test('the retention sweep forgets trajectories past their retention, and their record blobs with them', timed(60_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp'), trajectoryRetentionMs: 3000 })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tj5', functionsDir })
  defer(() => node.close())
  const c = await client(defer, cp)
  const sb = await c.create({})
  await sb.exec(['js', 'console.log("y".repeat(200000))'])
  await sb.kill()
  const [step] = await completed(c, sb.id) as ExecStep[]
  const blob = storePaths(join(dir, 'cp', 'blobs'), step!.stdout!.blob!).blob
  assert.ok(existsSync(blob))
  await waitFor(async () => await c.trajectory(sb.id).then(() => false, (e: unknown) => isWarrenError(e, ErrorCodes.NOT_FOUND)), 20_000, 'the trajectory forgotten')
  await waitFor(() => !existsSync(blob), 5000, 'its blob deleted')
}))

test('a tenant past its trajectory storage quota loses its oldest ended trajectories first, their blobs with them; its live one and another tenant\'s stay', timed(60_000, async (defer) => {
  const dir = tempDir(defer)
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'tj6', functionsDir })
  defer(() => node.close())
  const admin = await connect({ url: cp.url, token: await cp.createToken('ops', ['admin']) })
  defer(() => admin.close())
  assert.is((await admin.setQuotas('small', { trajectoryBytes: 500_000 })).trajectoryBytes, 500_000)
  const small = await client(defer, cp, 'small')
  const other = await client(defer, cp, 'other')
  /** A sandbox whose one command printed 200 kB (a record blob of its own), ended and stored whole. */
  let n = 0
  const rollout = async (c: Client, end = true): Promise<{ id: string, blob: string }> => {
    const sb = await c.create({})
    await sb.exec(['js', `console.log("y".repeat(200000) + ${n++})`])
    if (!end) {
      await waitFor(async () => (await c.trajectory(sb.id)).steps[0]?.kind === 'exec', 15_000, 'the live step stored')
      return { id: sb.id, blob: '' }
    }
    await sb.kill()
    const [step] = await completed(c, sb.id) as ExecStep[]
    return { id: sb.id, blob: storePaths(join(dir, 'cp', 'blobs'), step!.stdout!.blob!).blob }
  }
  const theirs = [await rollout(other), await rollout(other), await rollout(other)]
  const mine = [await rollout(small), await rollout(small), await rollout(small), await rollout(small)]
  const kept = async (c: Client, id: string): Promise<boolean> => await c.trajectory(id).then(() => true, (e: unknown) => {
    if (isWarrenError(e, ErrorCodes.NOT_FOUND)) return false
    throw e
  })
  assert.equal(await Promise.all(mine.map(async (r) => await kept(small, r.id))), [false, false, true, true], 'the two oldest went')
  await waitFor(() => !existsSync(mine[0]!.blob) && !existsSync(mine[1]!.blob), 5000, 'their blobs deleted')
  assert.ok(existsSync(mine[2]!.blob) && existsSync(mine[3]!.blob))
  assert.equal(await Promise.all(theirs.map(async (r) => await kept(other, r.id))), [true, true, true], 'another tenant\'s stay')
  // A live trajectory is never taken: past the quota with it, the ended ones go.
  const live = await rollout(small, false)
  assert.equal(await Promise.all([...mine.slice(2), live].map(async (r) => await kept(small, r.id))), [false, true, true])
}))

test.run()
