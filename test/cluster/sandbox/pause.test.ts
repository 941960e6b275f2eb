/**
 * The sandbox actor's pause, resume and snapshot, over a backend whose freeze is real (host
 * processes stopped with SIGSTOP): what a paused sandbox refuses and what it still does, its
 * TTL and idle clocks, what it reports, and the snapshot's push.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ActorSystem, type Ref } from '../../../src/actors/index.js'
import { NodeTrajectories, parseSandboxSpec, Sandbox, TrajectoryStore, type OutputPage, type SandboxArgs, type SandboxEvent, type SandboxInfo, type SandboxMessage } from '../../../src/cluster/index.js'
import { openState } from '../../../src/state/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { sleep, timed, waitFor } from '../../support/index.js'
import { createProcessBackend, type ProcessBackend } from './process-backend.js'

interface Started { ref: Ref<SandboxMessage>, backend: ProcessBackend, events: SandboxEvent[], pushed: Array<{ file: string, kind: string }>, store: TrajectoryStore, id: string }

let n = 0
/** A sandbox actor over the process backend, stopped with the test. */
async function start (defer: (fn: () => unknown) => void, spec: Record<string, unknown> = {}, more: Partial<SandboxArgs> = {}): Promise<Started> {
  const system = new ActorSystem({ name: `pt${n++}` })
  defer(() => system.shutdown(2000))
  const backend = more.backend as ProcessBackend | undefined ?? createProcessBackend()
  defer(() => backend.close())
  const events: SandboxEvent[] = []
  const pushed: Started['pushed'] = []
  // Its trajectory goes to a store of the test's own.
  const state = openState(undefined)
  defer(() => state.close())
  const store = new TrajectoryStore(state.db)
  const trajectories = new NodeTrajectories({ nodeId: `pt${n}`, send: async (b) => store.append(b) })
  defer(() => trajectories.close())
  trajectories.linkUp()
  const spec0 = parseSandboxSpec({ backend: 'container', ...spec })
  const args: SandboxArgs = {
    id: `sb${n}`,
    tenant: 't',
    spec: spec0,
    backend,
    report: (e) => events.push(e),
    trajectory: trajectories.open({ sandboxId: `sb${n}`, tenant: 't', spec: spec0, createdAt: Date.now() }),
    // As the blob store would: the digest of the file's bytes.
    pushBlob: async (file, kind) => {
      pushed.push({ file, kind })
      const data = readFileSync(file)
      return { digest: `sha256:${createHash('sha256').update(data).digest('hex')}`, bytes: data.length }
    },
    ...more
  }
  const ref = system.spawn<SandboxMessage>(() => new Sandbox(args), { name: `sb-${args.id}` })
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).state, more.adopted?.paused === true ? 'paused' : 'ready')
  return { ref, backend, events, pushed, store, id: args.id }
}

async function refusal (p: Promise<unknown>): Promise<{ code: string, details: Record<string, unknown> | undefined }> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err), `expected a refusal, got ${String(err)}`)
  return { code: err.code, details: err.details }
}

const text = (page: OutputPage): string => page.chunks.map((c) => new TextDecoder().decode(c.data)).join('')

/** Reads a command's output until a page comes back empty: what was in flight has arrived. */
async function drain (ref: Ref<SandboxMessage>, execId: string, from: number): Promise<number> {
  for (;;) {
    const page = await ref.ask<OutputPage>({ type: 'read', execId, fromSeq: from, waitMs: 200 })
    if (page.chunks.length === 0) return page.nextSeq
    from = page.nextSeq
  }
}

test('a paused sandbox is frozen: its loop prints nothing, commands and files are refused naming paused; info, read and resume work', timed(20_000, async (defer) => {
  const { ref, events } = await start(defer)
  const first = await ref.ask<OutputPage>({ type: 'exec', execId: 'loop', argv: ['sh', '-c', 'while true; do date +%s%N; sleep 0.02; done'] })
  let seq = first.nextSeq
  seq = (await ref.ask<OutputPage>({ type: 'read', execId: 'loop', fromSeq: seq, waitMs: 1000 })).nextSeq
  const paused = await ref.ask<SandboxInfo>({ type: 'pause' })
  assert.is(paused.state, 'paused')
  assert.is(paused.pauseSeq, 1)
  assert.is((await ref.ask<SandboxInfo>({ type: 'pause' })).state, 'paused', 'a second pause is not an error')
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).pauseSeq, 1, 'and changes nothing')

  seq = await drain(ref, 'loop', seq)
  const still = await ref.ask<OutputPage>({ type: 'read', execId: 'loop', fromSeq: seq, waitMs: 600 })
  assert.is(still.chunks.length, 0, `a frozen loop prints nothing, got ${text(still)}`)

  for (const m of [
    { type: 'exec', execId: 'e2', argv: ['true'] },
    { type: 'stdin', execId: 'loop', offset: 0, data: new Uint8Array(1) },
    { type: 'exec-resize', execId: 'loop', cols: 10, rows: 10 },
    { type: 'files', req: { op: 'stat', path: '/' } }
  ] as SandboxMessage[]) {
    const r = await refusal(ref.ask(m))
    assert.is(r.code, ErrorCodes.SANDBOX_PAUSED, m.type)
    assert.equal(r.details, { id: 'sb1', state: 'paused' }, m.type)
  }

  const resumed = await ref.ask<SandboxInfo>({ type: 'resume' })
  assert.is(resumed.state, 'ready')
  assert.is(resumed.pauseSeq, 2)
  assert.is((await ref.ask<SandboxInfo>({ type: 'resume' })).pauseSeq, 2, 'resuming a running sandbox is not an error')
  const after = await ref.ask<OutputPage>({ type: 'read', execId: 'loop', fromSeq: seq, waitMs: 1000 })
  assert.ok(after.chunks.length > 0, 'the loop prints again')
  await ref.ask<OutputPage>({ type: 'exec', execId: 'e3', argv: ['echo', 'ok'] })
  const reported = events.filter((e) => e.pauseSeq !== undefined).map((e) => [e.state, e.pauseSeq])
  assert.equal(reported, [['paused', 1], ['ready', 2]], 'the node hears of each change, numbered')
}))

test('pausing is refused as UNSUPPORTED (field backend) by a backend without snapshots; snapshot too', timed(10_000, async (defer) => {
  const backend = createProcessBackend()
  ;(backend as { snapshots?: boolean }).snapshots = false
  const { ref } = await start(defer, {}, { backend })
  for (const type of ['pause', 'resume', 'snapshot'] as const) {
    const r = await refusal(ref.ask({ type }))
    assert.is(r.code, ErrorCodes.UNSUPPORTED, type)
    assert.is(r.details?.field, 'backend', type)
  }
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).state, 'ready')
}))

test('pausedTtl false: the paused time is added to expiresAt at resume; by default it is not', timed(15_000, async (defer) => {
  for (const pausedTtl of [false, true]) {
    const { ref } = await start(defer, { ttlMs: 60_000, pausedTtl })
    const before = (await ref.ask<SandboxInfo>({ type: 'info' })).expiresAt
    const pauseAsked = Date.now()
    await ref.ask({ type: 'pause' })
    const pauseDone = Date.now()
    await sleep(300)
    const resumeAsked = Date.now()
    const after = (await ref.ask<SandboxInfo>({ type: 'resume' })).expiresAt
    const resumeDone = Date.now()
    if (pausedTtl) {
      assert.is(after, before, 'the TTL kept counting')
    } else {
      assert.ok(after - before >= resumeAsked - pauseDone, `moved on by ${after - before} ms, paused at least ${resumeAsked - pauseDone}`)
      assert.ok(after - before <= resumeDone - pauseAsked, `moved on by ${after - before} ms, paused at most ${resumeDone - pauseAsked}`)
    }
  }
}))

test('while paused with pausedTtl false the TTL does not fire, and neither does the idle timeout; set-ttl and kill work', timed(15_000, async (defer) => {
  const { ref, events } = await start(defer, { ttlMs: 800, idleTimeoutMs: 400, pausedTtl: false })
  await ref.ask({ type: 'pause' })
  await sleep(1500)
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).state, 'paused', 'neither its TTL nor its idle time ended it')
  const set = await ref.ask<SandboxInfo>({ type: 'set-ttl', ttlMs: 30_000 })
  assert.ok(set.expiresAt >= Date.now() + 29_000, 'set-ttl works while paused')
  assert.ok(await ref.ask({ type: 'kill' }))
  await waitFor(() => events.some((e) => e.state === 'gone'), 5000, 'gone')
  assert.is(events.find((e) => e.state === 'gone')!.reason, 'killed')
}))

test('an idle timeout counts from the resume, not from before the pause', timed(15_000, async (defer) => {
  const { ref, events } = await start(defer, { idleTimeoutMs: 500 })
  await ref.ask({ type: 'pause' })
  await sleep(900)
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).state, 'paused')
  await ref.ask({ type: 'resume' })
  const resumed = Date.now()
  await waitFor(() => events.some((e) => e.state === 'gone'), 5000, 'idle end')
  assert.ok(Date.now() - resumed >= 500, 'it idled a whole timeout after the resume')
  assert.is(events.find((e) => e.state === 'gone')!.reason, 'idle')
}))

test('snapshot: cut by the backend, pushed as a snapshot blob, answered after the push; in ready and paused; none without a blob store; each snapshot, pause and resume a step of the trajectory', timed(10_000, async (defer) => {
  const { ref, backend, pushed, store, id } = await start(defer)
  const r = await ref.ask<{ layer: string, bytes: number, flattened: boolean }>({ type: 'snapshot', snapshot: 'snap-0000000000000001' })
  assert.match(r.layer, /^sha256:[0-9a-f]{64}$/)
  assert.is(r.flattened, false)
  assert.is(pushed.length, 1)
  assert.is(pushed[0]!.kind, 'snapshot')
  await ref.ask({ type: 'pause' })
  const flat = await ref.ask<{ flattened: boolean, layer: string }>({ type: 'snapshot', flatten: true, snapshot: 'snap-0000000000000002' })
  assert.is(flat.flattened, true)
  assert.is((await ref.ask<SandboxInfo>({ type: 'info' })).state, 'paused', 'a snapshot of a paused sandbox leaves it paused')
  assert.equal(backend.calls.filter((c) => !c.startsWith('resume')).map((c) => c.split(':')[0]), ['snapshot', 'pause', 'snapshot'])
  await ref.ask({ type: 'pause' }) // paused already: no change, no step
  await ref.ask({ type: 'resume' })
  await ref.ask({ type: 'trajectory-flush' })
  assert.equal(store.read('t', id, 0).steps.map((s) => s.kind === 'snapshot' ? [s.seq, s.snapshot, s.layer] : [s.seq, s.kind]), [
    [0, 'snap-0000000000000001', r.layer], [1, 'pause'], [2, 'snap-0000000000000002', flat.layer], [3, 'resume']
  ])

  const bare = await start(defer, {}, { pushBlob: undefined })
  const refused = await refusal(bare.ref.ask({ type: 'snapshot' }))
  assert.is(refused.code, ErrorCodes.UNSUPPORTED)
}))

test('a sandbox adopted paused starts paused; deterministic values reach the backend under the spec env', timed(10_000, async (defer) => {
  const backend = createProcessBackend()
  const handle = await backend.create({})
  const { ref } = await start(defer, {}, { backend, adopted: { handle, createdAt: Date.now(), paused: true } })
  assert.is((await refusal(ref.ask({ type: 'exec', execId: 'a', argv: ['true'] }))).code, ErrorCodes.SANDBOX_PAUSED)
  assert.is((await ref.ask<SandboxInfo>({ type: 'resume' })).state, 'ready')

  const det = await start(defer, { env: { TZ: 'Asia/Tokyo' }, deterministic: { hostname: 'box', seed: 9 } })
  const page = await det.ref.ask<OutputPage>({ type: 'exec', execId: 'env', argv: ['sh', '-c', 'echo $TZ $LANG $LC_ALL $SOURCE_DATE_EPOCH $WARREN_SEED $PYTHONHASHSEED'] })
  let out = text(page)
  for (let from = page.nextSeq; page.result === undefined && !out.endsWith('\n');) {
    const more = await det.ref.ask<OutputPage>({ type: 'read', execId: 'env', fromSeq: from, waitMs: 1000 })
    out += text(more)
    from = more.nextSeq
  }
  assert.is(out, 'Asia/Tokyo C.UTF-8 C.UTF-8 0 9 9\n')
  assert.is(det.backend.specOf({ id: 'p0', kind: 'container' })?.hostname, 'box')
}))

test.run()
