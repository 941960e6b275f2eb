/**
 * Resumable execs (agent/protocol.h, "Resumable execs"): a command started with `retain`
 * outlives its connection; a new connection lists it, attaches from a seq and gets the frames
 * that were not acknowledged again, byte-exact; what it keeps while nobody reads is bounded.
 */
import { readFileSync } from 'node:fs'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { connectAgent, type AgentClient } from '../../../src/backends/container/index.js'
import { AgentLimits } from '../../../src/backends/container/protocol.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'
import { registerLeftoverCheck, sandboxTest, sh, startSandbox, text } from './helpers.js'

/** Frames as a handler saw them, in order. */
function collector (): { out: string[], handlers: { onStdout: (c: Uint8Array) => void } } {
  const out: string[] = []
  return { out, handlers: { onStdout: (c) => out.push(text(c)) } }
}

async function rejection (p: Promise<unknown>): Promise<unknown> {
  return await p.then(() => undefined, (err: unknown) => err)
}

sandboxTest('a retained exec outlives its connection; attach resends what was not acknowledged; ack releases its end', timed(20_000, async (defer) => {
  const { sb, client: c1 } = await startSandbox(defer)
  await sh(c1, 'mkfifo /tmp/go')
  const first = collector()
  const job = c1.startExec(['sh', '-c', 'echo first; cat /tmp/go; echo last'], { retain: { tag: 'job-1' } }, first.handlers)
  void job.result.catch(() => {})
  await waitFor(() => first.out.length === 1, 5000, 'its first line')
  await c1.close() // not acknowledged: the agent keeps frame 0

  const c2 = await connectAgent(sb.socketPath)
  defer(() => c2.close())
  const listed = await c2.listExecs()
  assert.equal(listed.map((x) => [x.tag, x.seq, x.acked, x.ended, x.attached]), [['job-1', 1, 0, false, false]])
  const id = listed[0]!.id
  // Past what it sent, or an id it never had: refused, naming the field where there is one.
  const ahead = await rejection(c2.attachExec(id, { fromSeq: 2 }).result)
  assert.ok(isWarrenError(ahead, ErrorCodes.INVALID_ARGUMENT) && ahead.details?.field === 'seq', String(ahead))
  assert.ok(isWarrenError(await rejection(c2.attachExec(id + 1000, { fromSeq: 0 }).result), ErrorCodes.NOT_FOUND))

  const second = collector()
  const again = c2.attachExec(id, { fromSeq: 0 }, second.handlers)
  await waitFor(() => second.out.length === 1, 5000, 'frame 0 again')
  assert.equal(second.out, ['first\n'])
  await sh(c2, 'echo go > /tmp/go')
  const r = await again.result
  assert.is(r.exitCode, 0)
  assert.is(second.out.join(''), 'first\ngo\nlast\n')
  const frames = second.out.length // 2 or 3: the pipe may hand over both lines in one read
  again.ack(frames - 1) // all but the last frame had for good; it and the exit not yet
  await c2.close()

  const c3 = await connectAgent(sb.socketPath)
  defer(() => c3.close())
  assert.equal((await c3.listExecs()).map((x) => [x.seq, x.acked, x.ended]), [[frames, frames - 1, true]])
  const gap = await rejection(c3.attachExec(id, { fromSeq: frames - 2 }).result)
  assert.ok(isWarrenError(gap, ErrorCodes.STREAM_RESUME_GAP), String(gap))
  const third = collector()
  const rest = c3.attachExec(id, { fromSeq: frames - 1 }, third.handlers)
  assert.is((await rest.result).exitCode, 0)
  assert.equal(third.out, [second.out[frames - 1]])
  rest.ack(frames + 1) // past the exit's seq: the record goes
  assert.equal(await c3.listExecs(), [])
  // Ids the client picks are above the retained ones it saw, so a new exec cannot take one.
  assert.is(await sh(c3, 'echo new'), 'new\n')
}))

sandboxTest('tags: only with retain, at most maxTag bytes; an exec without retain still dies with its connection', timed(15_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  const long = await rejection(client.exec(['true'], { retain: { tag: 'x'.repeat(AgentLimits.maxTag + 1) } }))
  assert.ok(isWarrenError(long, ErrorCodes.INVALID_ARGUMENT) && long.details?.field === 'tag', String(long))
  assert.is((await client.exec(['true'], { retain: { tag: 'x'.repeat(AgentLimits.maxTag) } })).exitCode, 0)
  let pid = 0
  const plain = client.startExec(['sleep', '600'], {}, { onStart: (info) => { pid = info.pid } })
  void plain.result.catch(() => {})
  await waitFor(() => pid > 0, 5000, 'sleep running')
  await client.close()
  const c2 = await connectAgent(sb.socketPath)
  defer(() => c2.close())
  // A host lists first: its ids then stay clear of the retained execs' (the agent refuses a clash).
  const listed = await c2.listExecs()
  await waitFor(async () => (await sh(c2, `[ -d /proc/${pid} ] && echo alive || echo gone`)) === 'gone\n', 5000, 'sleep killed with its connection')
  // The finished retained one was never acknowledged: it is listed, ended.
  assert.equal(listed.map((x) => x.ended), [true])
}))

/** The agent's resident memory (it is the sandbox's PID 1), in bytes. */
function agentRss (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m?.[1] ?? 0) * 1024
}

/** Waits until the exec's seq stops moving (the agent stopped reading it); its seq then. */
async function stalled (client: AgentClient, id: number): Promise<number> {
  let last = -1
  return await waitFor(async () => {
    const seq = (await client.listExecs()).find((x) => x.id === id)?.seq ?? -1
    const still = seq === last && seq > 0
    last = seq
    return still ? seq : undefined
  }, 20_000, 'the flood held back')
}

sandboxTest('a detached flood (yes) stays bounded in the agent, and resumes byte-exact', timed(60_000, async (defer) => {
  const { sb, client: c1 } = await startSandbox(defer)
  const before = agentRss(sb.pid)
  let seen = ''
  const flood = c1.startExec(['yes'], { retain: { tag: 'flood' } }, { onStdout: (c) => { if (seen.length < 1024 * 1024) seen += text(c) } })
  void flood.result.catch(() => {})
  await waitFor(() => seen.length >= 64 * 1024, 10_000, 'output flowing')
  await c1.close()

  const c2 = await connectAgent(sb.socketPath)
  defer(() => c2.close())
  const id = (await c2.listExecs())[0]!.id
  await stalled(c2, id)
  const grown = agentRss(sb.pid) - before
  // What it keeps is bounded (plus allocator slack), not what yes could write in the meantime.
  assert.ok(grown < AgentLimits.retainMaxBytes + 8 * 1024 * 1024, `the agent grew by ${grown} bytes`)
  // From seq 0 again: what the first connection saw is where the resend starts, byte for byte.
  let resent = ''
  let bytes = 0
  let frames = 0
  // Acknowledged as it comes (the frames are numbered from 0): the agent reads on.
  const again = c2.attachExec(id, { fromSeq: 0 }, {
    onStdout: (c) => { bytes += c.length; if (resent.length < seen.length) resent += text(c); again.ack(++frames) }
  })
  await waitFor(() => bytes > AgentLimits.retainMaxBytes + 1024 * 1024, 20_000, 'what was kept, then more')
  assert.is(resent.slice(0, seen.length), seen)
  assert.ok(/^(y\n)+$/.test(resent), 'only whole lines of y')
  await again.kill()
  assert.ok((await again.result).killed)
}))

registerLeftoverCheck()
test.run()
