import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { runSimulation } from '../../sim/engine.js'
import { MAX_TRACE_LINE, parseTrace } from '../../sim/trace.js'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { timed } from '../support/index.js'

/** 240 creates a second apart; most are killed 0.5–30.5 s later, every fifth runs on. */
function makeTrace (): { text: string, creates: number, kills: number, peak: number } {
  const events: Array<{ t: number, line: string, delta: number }> = []
  let kills = 0
  for (let i = 0; i < 240; i++) {
    const t = i * 1000
    const spec = { backend: 'container', limits: { cpus: 1 + (i % 2), memoryMiB: 512 }, image: { base: `b${i % 7}`, ...(i % 3 === 0 ? { workspace: `w${i}` } : {}) } }
    events.push({ t, line: JSON.stringify({ t, op: 'create', id: `s${i}`, spec }), delta: 1 })
    if (i % 5 !== 0) {
      const k = t + 500 + ((i * 7919) % 31) * 1000
      events.push({ t: k, line: JSON.stringify({ t: k, op: 'kill', id: `s${i}` }), delta: -1 })
      kills++
    }
  }
  events.sort((a, b) => a.t - b.t)
  let live = 0; let peak = 0
  for (const e of events) { live += e.delta; peak = Math.max(peak, live) }
  return { text: events.map((e) => e.line).join('\n') + '\n', creates: 240, kills, peak }
}

test('a trace drives the engine: its creates, kills and concurrency peak come out', timed(60_000, async () => {
  const { text, creates, kills, peak } = makeTrace()
  const trace = parseTrace(text)
  assert.is(trace.events.length, creates + kills)
  assert.ok(trace.events.length > 300, `${trace.events.length} events`)
  const s = await runSimulation({
    seed: 2,
    durationMs: trace.lastMs + 1000,
    arrivals: trace,
    warmStart: false,
    nodes: { count: 4, cpus: 64, memoryMiB: 64 * 1024, crashesPerNodePerDay: 0 },
    shards: 2
  })
  assert.is(s.requested, creates)
  assert.is(s.created, creates)
  assert.is(s.rejected, 0)
  assert.is(s.killed, kills)
  assert.is(s.peakConcurrent, peak)
  assert.is(s.endConcurrent, creates - kills)
  assert.is(s.residents, 0)
  // The default path carries no `killed`.
  const d = await runSimulation({ seed: 2, durationMs: 60_000, nodes: { count: 4, cpus: 64, memoryMiB: 64 * 1024 }, workload: { creationsPerDay: 100_000, burstSizeMedian: 50 }, shards: 2 })
  assert.is(d.killed, undefined)
}))

test('a trace too big for its cluster is refused in part, and kills of refused sandboxes are no-ops', timed(30_000, async () => {
  const lines: string[] = []
  for (let i = 0; i < 20; i++) lines.push(JSON.stringify({ t: i, op: 'create', id: `x${i}`, spec: { backend: 'container', limits: { cpus: 1, memoryMiB: 256 }, image: { base: 'b' } } }))
  for (let i = 0; i < 20; i++) lines.push(JSON.stringify({ t: 5000, op: 'kill', id: `x${i}` }))
  const s = await runSimulation({
    seed: 1, durationMs: 6000, arrivals: parseTrace(lines.join('\n')), warmStart: false, placementTimeoutMs: 100,
    nodes: { count: 1, cpus: 4, memoryMiB: 8192, cpuOvercommit: 1, memoryOvercommit: 1, crashesPerNodePerDay: 0 }, shards: 1
  })
  assert.is(s.created, 4)
  assert.is(s.rejected, 16)
  assert.is(s.killed, 4)
  assert.is(s.endConcurrent, 0)
}))

const refused = (text: string, line: number, what: RegExp): void => {
  try {
    parseTrace(text)
  } catch (err) {
    assert.ok(isWarrenError(err, ErrorCodes.INVALID_ARGUMENT), String(err))
    assert.match((err as Error).message, new RegExp(`line ${line}\\b`))
    assert.match((err as Error).message, what)
    return
  }
  assert.unreachable(`accepted: ${text.slice(0, 80)}`)
}

test('a malformed line is refused with its number', () => {
  const ok = (t: number, id: string): string => JSON.stringify({ t, op: 'create', id, spec: { backend: 'container', limits: { cpus: 1, memoryMiB: 512 }, image: { base: 'py' } } })
  refused([ok(0, 'a'), ok(1, 'b'), '{"t": 2, "op": "create", "id": ', ok(3, 'c')].join('\n'), 3, /not valid JSON/)
  refused([ok(0, 'a'), '', ok(5, 'b'), ok(4, 'c')].join('\n'), 4, /before/)
  refused([ok(0, 'a'), '{"t":1,"op":"kill","id":"zz"}'].join('\n'), 2, /not running/)
  refused([ok(0, 'a'), ok(1, 'a')].join('\n'), 2, /already running/)
  refused('{"t":0,"op":"boot","id":"a"}', 1, /op must be/)
  refused('{"t":0,"op":"create","id":"a","spec":{"backend":"container","limits":{"cpus":1,"memoryMiB":512},"image":{"base":"p"},"extra":1}}', 1, /unknown key/)
  refused('{"t":0,"op":"create","id":"a","spec":{"backend":"teapot","limits":{"cpus":1,"memoryMiB":512},"image":{"base":"p"}}}', 1, /backend/)
  refused('{"t":0,"op":"create","id":"a","spec":{"backend":"container","limits":{"cpus":-1,"memoryMiB":512},"image":{"base":"p"}}}', 1, /cpus/)
  refused([ok(0, 'a'), `{"t":1,"op":"create","id":"${'x'.repeat(MAX_TRACE_LINE)}"}`].join('\n'), 2, /longer than/)
  refused('[1,2]', 1, /not a JSON object/)
  assert.is(parseTrace(ok(0, 'a') + '\r\n\n').events.length, 1)
})

test.run()
