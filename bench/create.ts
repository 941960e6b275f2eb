/**
 * `npm run bench -- create [seconds]`: a control plane and 4 node agents, each its own process
 * on loopback, and clients in this process creating function sandboxes as fast as the system
 * accepts them (batched requests, many in flight), for at least 10 s. Sandboxes get a short TTL
 * so the cluster reaches a steady state instead of filling up.
 *
 * Figures: creates_per_s, request latency p50/p99 (one request creates a batch), exec_per_s
 * (one `js` command per sandbox, measured after), and the control plane's RSS at the start and
 * the end of the run. Baseline in the same run: a raw WebSocket round trip between the same
 * processes' kind (ws echo), as `raw_ws_rtt_p50_ms`.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { WebSocket, WebSocketServer } from 'ws'
import { ErrorCodes, isWarrenError } from '../src/errors.js'
import { connect, type Client } from '../src/sdk/index.js'
import { progress, progressDone } from './progress.js'

const seconds = Number(process.argv[2] ?? 20)
const NODES = 4
const BATCH = 20
const IN_FLIGHT = 8
const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..', '..')
const cli = join(root, 'bin', 'warren.js')
const dir = mkdtempSync(join(tmpdir(), 'warren-bench-'))
const children: ChildProcess[] = []

function start (args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<{ proc: ChildProcess, out: string }> {
  const proc = spawn(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  children.push(proc)
  return new Promise((resolve, reject) => {
    let out = ''
    proc.stdout!.on('data', (b: Buffer) => { out += b.toString(); if (ready.test(out)) resolve({ proc, out }) })
    proc.once('exit', (code) => reject(new Error(`${args[0]} exited ${code}: ${out}`)))
  })
}

function rssMb (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? NaN : Math.round(Number(m[1]) / 1024)
}

function percentile (sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

async function rawWsRtt (): Promise<number> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  wss.on('connection', (s) => s.on('message', (m) => s.send(m)))
  await new Promise((resolve) => wss.once('listening', resolve))
  const port = (wss.address() as { port: number }).port
  const ws = new WebSocket(`ws://127.0.0.1:${port}`)
  await new Promise((resolve) => ws.once('open', resolve))
  const times: number[] = []
  for (let i = 0; i < 2000; i++) {
    const t = performance.now()
    await new Promise<void>((resolve) => { ws.once('message', () => resolve()); ws.send('x'.repeat(200)) })
    times.push(performance.now() - t)
  }
  ws.close()
  wss.close()
  return percentile(times.sort((a, b) => a - b), 50)
}

async function main (): Promise<void> {
  const env = { WARREN_CONFIG: join(dir, 'config.json') }
  progress('starting the control plane')
  const cp = await start(['up', '--port', '0', '--no-local-node', '--data-dir', join(dir, 'cp')], env, /Ctrl-C/)
  const url = /url:\s+(\S+)/.exec(cp.out)![1]!
  const token = /token:\s+(wrn_\S+)/.exec(cp.out)![1]!
  const joinToken = /join token:\s+(\S+)/.exec(cp.out)![1]!
  for (let i = 0; i < NODES; i++) {
    progress(`starting node ${i + 1}/${NODES}`)
    await start(['node', '--join', url, '--token', joinToken, '--node-id', `bench-${i}`, '--data-dir', join(dir, `n${i}`)], env, /joined/)
  }
  const client: Client = await connect({ url, token })
  // Warm up: JIT, pools, links.
  for (let i = 0; i < 10; i++) await client.createMany(BATCH, { ttlMs: 2000 })
  const rssIdle = rssMb(cp.proc.pid!)
  // Sandboxes live 2 s, so after 3 s of load the cluster is in its steady state: memory from
  // there to the end must stay flat.
  let rssStart = NaN
  const steady = setTimeout(() => { rssStart = rssMb(cp.proc.pid!) }, 3000)
  const rssSeries: number[] = []
  const sampler = setInterval(() => rssSeries.push(rssMb(cp.proc.pid!)), 1000)

  let created = 0
  let refused = 0
  const latencies: number[] = []
  const endAt = performance.now() + seconds * 1000
  const startedAt = performance.now()
  let lastReport = startedAt
  async function lane (): Promise<void> {
    while (performance.now() < endAt) {
      const t = performance.now()
      let sbs
      try {
        sbs = await client.createMany(BATCH, { ttlMs: 2000 })
      } catch (err) {
        // Over the tenant's rate or an overloaded shard: a well-behaved client waits as told.
        if (!isWarrenError(err, ErrorCodes.QUOTA) && !isWarrenError(err, ErrorCodes.OVERLOADED)) throw err
        refused++
        await new Promise((resolve) => setTimeout(resolve, Number(err.details?.retryAfterMs ?? 10)))
        continue
      }
      latencies.push(performance.now() - t)
      created += sbs.length
      if (performance.now() - lastReport > 1000) {
        lastReport = performance.now()
        progress(`create: ${created.toLocaleString('en')} sandboxes, ${Math.round(created / ((lastReport - startedAt) / 1000)).toLocaleString('en')}/s`)
      }
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  const elapsed = (performance.now() - startedAt) / 1000
  clearTimeout(steady)
  clearInterval(sampler)
  const rssEnd = rssMb(cp.proc.pid!)

  progress('exec: one js command in each of 2,000 sandboxes')
  await new Promise((resolve) => setTimeout(resolve, 1000)) // let the tenant's rate bucket refill
  const sbs = await client.createMany(1000, { ttlMs: 60_000 })
  sbs.push(...await client.createMany(1000, { ttlMs: 60_000 }))
  const t = performance.now()
  let i = 0
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (i < sbs.length) { const sb = sbs[i++]!; await sb.exec(['js', '1']) }
  }))
  const execPerS = sbs.length / ((performance.now() - t) / 1000)
  await client.close()
  progress('baseline: raw ws round trips')
  const rawRtt = await rawWsRtt()
  progressDone()

  latencies.sort((a, b) => a - b)
  const p50 = percentile(latencies, 50)
  console.log(JSON.stringify({
    bench: 'create',
    creates_per_s: Math.round(created / elapsed),
    p50_ms: Number(p50.toFixed(1)),
    p99_ms: Number(percentile(latencies, 99).toFixed(1)),
    batch: BATCH,
    in_flight: IN_FLIGHT,
    seconds: Number(elapsed.toFixed(1)),
    nodes: NODES,
    backend: 'function',
    refused_requests: refused,
    exec_per_s: Math.round(execPerS),
    rss_mb_idle: rssIdle,
    rss_mb_start: rssStart,
    rss_mb_end: rssEnd,
    rss_mb_each_s: rssSeries,
    raw_ws_rtt_p50_ms: Number(rawRtt.toFixed(3)),
    p50_vs_raw_ws_rtt: Number((p50 / rawRtt).toFixed(1))
  }))
}

try {
  await main()
} finally {
  for (const c of children.reverse()) c.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 500))
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
