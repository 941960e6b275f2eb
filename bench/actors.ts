/**
 * `npm run bench -- actors`: the kernel's raw speed in one process.
 *   tell_per_s        messages told to one actor and handled
 *   ask_per_s         asks answered, many in flight
 *   spawn_stop_per_s  actors spawned and stopped
 *   bytes_per_idle_actor  heap growth per idle actor, measured over 100,000 actors
 * Baseline measured in the same run: Node's own in-process messaging, an EventEmitter
 * delivering the same messages to the same handler (`baseline_emits_per_s`), so a noisy
 * machine lowers both and the ratio stays meaningful.
 */
import { EventEmitter } from 'node:events'
import { Actor, ActorSystem } from '../src/actors/index.js'
import { progress } from './progress.js'

class Counter extends Actor<number> {
  count = 0
  receive (n: number): number { this.count += n; return this.count }
}
class Idle extends Actor<unknown> { receive (): void {} }

const gc = (globalThis as { gc?: () => void }).gc

async function measureTell (system: ActorSystem, n: number): Promise<number> {
  const ref = system.spawn(() => new Counter(), { mailbox: { capacity: n + 1 } })
  const start = performance.now()
  for (let i = 0; i < n; i++) ref.tell(1)
  await ref.ask(0, { timeoutMs: 60_000 }) // the ask queues behind every tell: it answers when all are handled
  const s = (performance.now() - start) / 1000
  await system.stop(ref)
  return n / s
}

async function measureAsk (system: ActorSystem, n: number, inFlight: number): Promise<number> {
  const ref = system.spawn(() => new Counter(), { mailbox: { capacity: inFlight + 1 } })
  const start = performance.now()
  let sent = 0
  async function lane (): Promise<void> {
    while (sent < n) { sent++; await ref.ask(1) }
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  const s = (performance.now() - start) / 1000
  await system.stop(ref)
  return n / s
}

async function measureSpawnStop (system: ActorSystem, n: number): Promise<number> {
  const start = performance.now()
  for (let i = 0; i < n; i++) {
    const ref = system.spawn(() => new Idle())
    void system.stop(ref)
  }
  const s = (performance.now() - start) / 1000
  if (system.size !== 0) throw new Error(`spawn/stop left ${system.size} actors`)
  return n / s
}

function measureIdleBytes (system: ActorSystem, n: number): number {
  gc?.(); gc?.()
  const before = process.memoryUsage().heapUsed
  const refs = []
  for (let i = 0; i < n; i++) refs.push(system.spawn(() => new Idle()))
  gc?.(); gc?.()
  const after = process.memoryUsage().heapUsed
  for (const ref of refs) system.kill(ref)
  return (after - before) / n
}

function measureBaseline (n: number): number {
  const c = new Counter()
  const emitter = new EventEmitter()
  emitter.on('message', (m: number) => c.receive(m))
  const start = performance.now()
  for (let i = 0; i < n; i++) emitter.emit('message', 1)
  if (c.count !== n) throw new Error('emitter lost messages')
  return n / ((performance.now() - start) / 1000)
}

async function best<T extends number> (label: string, runs: number, fn: () => Promise<T> | T): Promise<number> {
  let top = 0
  for (let i = 0; i < runs; i++) {
    top = Math.max(top, await fn())
    progress(`${label} run ${i + 1}/${runs}: ${Math.round(top).toLocaleString('en')}`)
  }
  return top
}

const system = new ActorSystem({ name: 'bench' })
const tell = await best('tell/s', 5, () => measureTell(system, 2_000_000))
const ask = await best('ask/s', 5, () => measureAsk(system, 500_000, 1000))
const spawnStop = await best('spawn+stop/s', 5, () => measureSpawnStop(system, 500_000))
const idleBytes = measureIdleBytes(system, 100_000)
const baseline = await best('baseline emits/s', 5, () => measureBaseline(2_000_000))
await system.shutdown()

console.log(JSON.stringify({
  bench: 'actors',
  tell_per_s: Math.round(tell),
  ask_per_s: Math.round(ask),
  spawn_stop_per_s: Math.round(spawnStop),
  bytes_per_idle_actor: Math.round(idleBytes),
  baseline_emits_per_s: Math.round(baseline),
  tell_vs_baseline: Number((tell / baseline).toFixed(4)),
  gc_exposed: gc !== undefined
}))
