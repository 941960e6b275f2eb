import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { startNode } from '../../src/cluster/index.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { ALL_SCOPES, functionsDir, startTestControlPlane } from '../cluster/harness.js'
import { timed, waitFor } from '../support/index.js'

/** A control plane and one node in this process, and a connected client. */
async function cluster (defer: (fn: () => unknown) => void, link = {}): Promise<Client> {
  const cp = await startTestControlPlane({ link })
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'local', functionsDir })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  return client
}

test('spawn: output arrives as an async iterable, in order, then wait() gives the result', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({})
  const h = sb.spawn(['stream', '20', '1000', '1'])
  let n = 0
  for await (const chunk of h) {
    assert.is(chunk.stream, 'stdout')
    assert.is(chunk.data.byteLength, 1000)
    assert.is(chunk.data[0], n % 251)
    n++
  }
  assert.is(n, 20)
  assert.is((await h.wait()).exitCode, 0)
}))

test('a command still running when its client closes fails with CONNECTION_CLOSED at once, instead of retrying against a link that will not come back', timed(8000, async (defer) => {
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await startNode({ url: cp.url, joinToken: cp.joinToken, nodeId: 'local', functionsDir })
  defer(() => node.close())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  const sb = await client.create({}) // ended with the node
  const h = sb.spawn(['stream', '100000', '10', '5'])
  await h[Symbol.asyncIterator]().next()
  await client.close()
  // Before, the pull kept retrying for ~20 s (30 tries with backoff), past this test's timeout.
  const err = await h.wait().then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err, ErrorCodes.CONNECTION_CLOSED), String(err))
}))

test('spawn: kill ends a running command', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({})
  const h = sb.spawn(['stream', '100000', '10', '5'])
  const first = await h[Symbol.asyncIterator]().next()
  assert.not.ok(first.done)
  await h.kill()
  const r = await h.wait()
  assert.is.not(r.exitCode, 0)
}))

test('exec options: stdin and env reach the command; a timeout cuts it with 124', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({ env: { BASE: 'b' } })
  const r = await sb.exec(['js', 'while (true) {}'], { timeoutMs: 300 })
  assert.is(r.exitCode, 124)
  assert.is(r.reason, 'timeout')
  const capped = await sb.exec(['stream', '100', '1024'], { maxOutputBytes: 10_000 })
  assert.ok(capped.truncated)
  assert.ok(capped.stdout.length <= 10_000)
}))

test('files on the function backend answer WARREN_ERR_UNSUPPORTED; stdin streaming too', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({})
  for (const call of [() => sb.files.write('/x', 'data'), () => sb.files.read('/x'), () => sb.files.list('/'), () => sb.files.remove('/x')]) {
    assert.ok(isWarrenError(await call().catch((e: unknown) => e), ErrorCodes.UNSUPPORTED))
  }
  // Interactive stdin needs a backend that streams it; functions take stdin up front.
  const open = sb.spawn(['js', '1'], { openStdin: true })
  assert.ok(isWarrenError(await open.write('x').catch((e: unknown) => e), ErrorCodes.UNSUPPORTED))
  assert.ok(isWarrenError(await open.wait().catch((e: unknown) => e), ErrorCodes.UNSUPPORTED))
  const shut = sb.spawn(['js', '1'])
  assert.ok(isWarrenError(await shut.write('x').catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT), 'spawned without openStdin')
  await shut.wait()
}))

test('trajectory: the commands run in a sandbox, in order, with their exit codes and outputs; read the same after the sandbox has ended', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({ labels: { run: 'r1' } })
  await sb.exec(['js', 'console.log("first")'])
  await sb.exec(['js', 'console.error("second"); throw new Error("no")'])
  const page = await sb.trajectory()
  assert.is(page.header?.sandboxId, sb.id)
  assert.equal(page.header?.spec.labels, { run: 'r1' })
  assert.equal(page.header?.layers, [], 'a function sandbox stands on no layers')
  const execs = page.steps.filter((s) => s.kind === 'exec')
  assert.equal(execs.map((e) => e.argv), [['js', 'console.log("first")'], ['js', 'console.error("second"); throw new Error("no")']])
  assert.equal(page.steps.map((s) => s.seq), [0, 1])
  assert.is(execs[0]!.exitCode, 0)
  assert.is(new TextDecoder().decode(execs[0]!.stdout!.data), 'first\n')
  assert.is(execs[1]!.exitCode, 1)
  assert.match(new TextDecoder().decode(execs[1]!.stderr!.data), /^second\n/)
  assert.ok(execs.every((e) => e.endedAt! >= e.at))
  assert.is(page.complete, false, 'it still runs')
  assert.equal((await sb.trajectory({ fromSeq: page.nextSeq })).steps, [])
  assert.ok(isWarrenError(await sb.trajectory({ fromSeq: -1 }).catch((e: unknown) => e), ErrorCodes.INVALID_ARGUMENT))
  await sb.kill()
  const after = await waitFor(async () => { const p = await client.trajectory(sb.id); return p.complete ? p : undefined }, 10_000, 'complete')
  assert.equal(after.steps, page.steps)
  const all = []
  for await (const s of client.steps(sb.id)) all.push(s)
  assert.equal(all, page.steps)
}))

test('idle timeout: a sandbox with no exec for idleTimeoutMs ends with reason idle', timed(30_000, async (defer) => {
  const client = await cluster(defer)
  const sb = await client.create({ idleTimeoutMs: 200 })
  await sb.exec(['js', '1'])
  await waitFor(() => sb.state === 'gone', 10_000, 'idle expiry')
  assert.is((await sb.info()).reason, 'idle')
}))

test('overload crosses the wire as WARREN_ERR_OVERLOADED', timed(30_000, async (defer) => {
  const client = await cluster(defer, { maxIncomingRequests: 2 })
  const sb = await client.create({})
  const results = await Promise.allSettled(Array.from({ length: 20 }, () => client.request({ type: 'info', id: sb.id })))
  const refused = results.filter((r) => r.status === 'rejected' && isWarrenError(r.reason, ErrorCodes.OVERLOADED))
  assert.ok(refused.length > 0, 'some requests were refused')
  for (const r of refused) assert.type((r as PromiseRejectedResult).reason.details?.retryAfterMs, 'number')
  assert.ok(results.some((r) => r.status === 'fulfilled'), 'the rest were served')
}))

test.run()
