/**
 * The sandbox actor's side of its trajectory, against a backend made for the test: egress
 * connections the backend reports become steps, and a sandbox's steps end with it; what the
 * control plane re-applies as `unrecorded` (a restore) is done but not recorded again.
 */
import { createHash } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ActorSystem, type Ref } from '../../../src/actors/index.js'
import type { Backend, EgressEvent, SandboxHandle } from '../../../src/backends/types.js'
import { createNodeAgent, NodeTrajectories, parseSandboxSpec, TrajectoryStore, type CreateOutcome, type NodeMessage, type SandboxMessage } from '../../../src/cluster/index.js'
import { createError, ErrorCodes } from '../../../src/errors.js'
import { openState } from '../../../src/state/index.js'
import { timed, waitFor } from '../../support/index.js'

/** A backend whose sandboxes do nothing but report the egress connections the test makes up. */
function egressBackend (): { backend: Backend, connect: (e: Omit<EgressEvent, 'at'>) => void } {
  const listeners = new Set<(e: EgressEvent) => void>()
  const unsupported = async (): Promise<never> => { throw createError(ErrorCodes.UNSUPPORTED, 'no files here') }
  const backend: Backend = {
    kind: 'container',
    create: async () => ({ id: 'h1', kind: 'container' }),
    exec: async (_h, _argv, opts) => { opts?.onStdout?.(new TextEncoder().encode('hi\n')); return { exitCode: 0, durationMs: 1, truncated: false } },
    files: { maxChunkBytes: 1024, read: unsupported, write: unsupported, list: unsupported, stat: unsupported, mkdir: unsupported, remove: unsupported, rename: unsupported, symlink: unsupported },
    kill: async () => {},
    close: async () => {},
    onEgress: (_h: SandboxHandle, listener) => { listeners.add(listener); return () => listeners.delete(listener) }
  }
  return { backend, connect: (e) => { for (const l of listeners) l({ ...e, at: 1234 }) } }
}

test('egress connections the backend reports are steps of the sandbox, between its commands; its trajectory ends with it', timed(10_000, async (defer) => {
  const state = openState(undefined)
  defer(() => state.close())
  const store = new TrajectoryStore(state.db)
  const system = new ActorSystem({ name: 'n1' })
  defer(() => system.shutdown(0))
  const trajectories = new NodeTrajectories({ nodeId: 'n1', send: async (b) => store.append(b) })
  defer(() => trajectories.close())
  trajectories.linkUp()
  const { backend, connect } = egressBackend()
  const agent = system.spawn<NodeMessage>(createNodeAgent({
    nodeId: 'n1', capacity: { cpus: 1, memoryMiB: 1024, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['container'] },
    backends: { container: backend }, report: () => {}, trajectories
  }), { name: 'agent' })
  const [made] = await agent.ask<CreateOutcome[]>({ type: 'create', items: [{ id: 'sbe', tenant: 't', spec: parseSandboxSpec({ backend: 'container' }) }] })
  assert.ok(made !== undefined && 'address' in made, JSON.stringify(made))
  const sb = system.lookup<SandboxMessage>(made.address)!
  await sb.ask({ type: 'exec', execId: 'e1', argv: ['curl', 'pypi.org'] })
  connect({ host: 'pypi.org', port: 443, allowed: true })
  connect({ host: 'evil.example', port: 80, allowed: false })
  await sb.ask({ type: 'trajectory-flush' })
  const page = await waitFor(() => { const p = store.read('t', 'sbe', 0); return p.steps.length === 3 ? p : undefined }, 5000, 'three steps')
  assert.equal(page.steps.map((s) => s.kind === 'egress' ? [s.seq, s.host, s.port, s.allowed, s.at] : [s.seq, s.kind]), [
    [0, 'exec'], [1, 'pypi.org', 443, true, 1234], [2, 'evil.example', 80, false, 1234]
  ])
  assert.is(page.header?.node, 'n1')
  await sb.ask({ type: 'kill' })
  await waitFor(() => store.read('t', 'sbe', 0).complete, 5000, 'complete once it ended')
  connect({ host: 'late.example', port: 1, allowed: true })
  assert.is(store.read('t', 'sbe', 0).steps.length, 3, 'nothing after its end')
}))

/** A sandbox of a backend whose files and commands all succeed (a stat finds nothing), in a node with a store. */
async function quietSandbox (defer: (fn: () => unknown) => void, id: string): Promise<{ sb: Ref<SandboxMessage>, store: TrajectoryStore, calls: string[] }> {
  const state = openState(undefined)
  defer(() => state.close())
  const store = new TrajectoryStore(state.db)
  const system = new ActorSystem({ name: `n-${id}` })
  defer(() => system.shutdown(0))
  const trajectories = new NodeTrajectories({ nodeId: 'n1', send: async (b) => store.append(b) })
  defer(() => trajectories.close())
  trajectories.linkUp()
  const calls: string[] = []
  const ok = (name: string) => async (_h: SandboxHandle, path: string, ...rest: unknown[]): Promise<never> => { calls.push(`${name} ${path}${typeof rest[0] === 'string' ? ` ${rest[0]}` : ''}`); return undefined as never }
  const backend: Backend = {
    kind: 'container',
    create: async () => ({ id: 'h1', kind: 'container' }),
    exec: async (_h, argv, opts) => { calls.push(`exec ${argv.join(' ')}`); opts?.onStdout?.(new TextEncoder().encode('hi\n')); return { exitCode: 0, durationMs: 1, truncated: false } },
    files: {
      maxChunkBytes: 1024, read: ok('read'), write: ok('write'), list: ok('list'), mkdir: ok('mkdir'), remove: ok('remove'), rename: ok('rename'), symlink: ok('symlink'),
      stat: async () => { throw createError(ErrorCodes.NOT_FOUND, 'nothing here') }
    },
    kill: async () => {},
    close: async () => {}
  }
  const agent = system.spawn<NodeMessage>(createNodeAgent({
    nodeId: 'n1', capacity: { cpus: 1, memoryMiB: 1024, cpuOvercommit: 1, memoryOvercommit: 1, maxSandboxes: {}, backends: ['container'] },
    backends: { container: backend }, report: () => {}, trajectories
  }), { name: 'agent' })
  const [made] = await agent.ask<CreateOutcome[]>({ type: 'create', items: [{ id, tenant: 't', spec: parseSandboxSpec({ backend: 'container' }) }] })
  assert.ok(made !== undefined && 'address' in made, JSON.stringify(made))
  return { sb: system.lookup<SandboxMessage>(made.address)!, store, calls }
}

test('a command and file changes sent unrecorded are made but leave no step; the same sent plainly are steps, a symlink too', timed(10_000, async (defer) => {
  const { sb, store, calls } = await quietSandbox(defer, 'sbu')
  const content = new TextEncoder().encode('restored bytes')
  const sha256 = createHash('sha256').update(content).digest('hex')
  for (const unrecorded of [true, false]) {
    const tag = unrecorded ? 'u' : 'r'
    await sb.ask({ type: 'exec', execId: `e-${tag}`, argv: ['echo', tag], ...(unrecorded ? { unrecorded } : {}) })
    const files = async (req: unknown): Promise<unknown> => await sb.ask({ type: 'files', req, ...(unrecorded ? { unrecorded } : {}) } as SandboxMessage)
    await files({ op: 'mkdir', path: `/d-${tag}`, parents: true })
    await files({ op: 'symlink', path: `/l-${tag}`, target: 'elsewhere' })
    await files({ op: 'write-begin', upload: `up-${tag}`, path: `/f-${tag}`, size: content.length })
    await files({ op: 'write-chunk', upload: `up-${tag}`, offset: 0, data: content })
    assert.equal(await files({ op: 'write-end', upload: `up-${tag}`, size: content.length, sha256 }), { size: content.length, sha256 })
    await files({ op: 'rename', path: `/f-${tag}`, to: `/g-${tag}` })
    await files({ op: 'remove', path: `/g-${tag}` })
  }
  for (const tag of ['u', 'r']) {
    for (const call of [`exec echo ${tag}`, `mkdir /d-${tag}`, `symlink /l-${tag} elsewhere`, `rename /f-${tag} /g-${tag}`, `remove /g-${tag}`]) {
      assert.ok(calls.includes(call), `${call} was done: ${calls.join('; ')}`)
    }
  }
  await sb.ask({ type: 'trajectory-flush' })
  const page = await waitFor(() => { const p = store.read('t', 'sbu', 0); return p.steps.length >= 6 ? p : undefined }, 5000, 'the recorded steps')
  assert.equal(page.steps.map((s) => [s.seq, s.kind]), [[0, 'exec'], [1, 'mkdir'], [2, 'symlink'], [3, 'write'], [4, 'rename'], [5, 'remove']], 'only the plain ones')
  assert.equal(page.steps[2], { seq: 2, at: page.steps[2]!.at, kind: 'symlink', path: '/l-r', target: 'elsewhere' })
  const write = page.steps[3] as Extract<typeof page.steps[number], { kind: 'write' }>
  assert.equal([write.path, write.content.sha256], ['/f-r', sha256])
}))

test.run()
