/**
 * `npm run bench -- python`: the Python SDK beside the TS one in the same run, on one
 * `warren up` (control plane and a local node): each client creates 1,000 function sandboxes
 * with one create_many, then runs one command in each (64 at a time), then kills them by label.
 *
 * Figures: for each client the create_many time, the exec phase's time and sandboxes per second
 * over both; `python_vs_ts` is the Python figure over the TS one (the SDK aims at ≥ 0.5).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from '../src/sdk/index.js'
import { progress, progressDone } from './progress.js'

const COUNT = 1000
const IN_FLIGHT = 64
const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..', '..')
const dir = mkdtempSync(join(tmpdir(), 'warren-bench-py-'))
let up: ChildProcess | undefined

interface Figures { create_ms: number, exec_ms: number, per_s: number }

// The Python side, run by /usr/bin/python3 with the package from python/src: the same work.
const PYTHON_CLIENT = `
import asyncio, json, os, sys, time
import warren
COUNT, IN_FLIGHT = int(sys.argv[1]), int(sys.argv[2])
async def main():
    async with await warren.AsyncClient.connect() as c:
        t0 = time.perf_counter()
        sbs = await c.create_many(COUNT, ttl_ms=120_000, labels={"bench": "python-py"})
        t1 = time.perf_counter()
        it = iter(sbs)
        async def lane():
            for sb in it:
                r = await sb.exec(["js", "1"])
                assert r.exit_code == 0, r
        await asyncio.gather(*(lane() for _ in range(IN_FLIGHT)))
        t2 = time.perf_counter()
        await c.kill(labels={"bench": "python-py"})
    print(json.dumps({"create_ms": (t1 - t0) * 1000, "exec_ms": (t2 - t1) * 1000, "per_s": COUNT / (t2 - t0)}))
asyncio.run(main())
`

function startUp (): Promise<{ url: string, token: string }> {
  const proc = up = spawn(process.execPath, [join(root, 'bin', 'warren.js'), 'up', '--port', '0', '--data-dir', join(dir, 'data')], {
    env: { ...process.env, WARREN_CONFIG: join(dir, 'config.json') },
    stdio: ['ignore', 'pipe', 'inherit']
  })
  return new Promise((resolve, reject) => {
    let out = ''
    proc.stdout!.on('data', (b: Buffer) => {
      out += b.toString()
      const url = /url:\s+(ws:\/\/\S+)/.exec(out)?.[1]
      const token = /token:\s+(wrn_\S+)/.exec(out)?.[1]
      if (url !== undefined && token !== undefined && out.includes('Ctrl-C')) resolve({ url, token })
    })
    proc.once('exit', (code) => reject(new Error(`warren up exited ${code}: ${out}`)))
  })
}

async function tsClient (url: string, token: string): Promise<Figures> {
  const client = await connect({ url, token })
  try {
    const t0 = performance.now()
    const sbs = await client.createMany(COUNT, { ttlMs: 120_000, labels: { bench: 'python-ts' } })
    const t1 = performance.now()
    let i = 0
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (i < sbs.length) {
        const r = await sbs[i++]!.exec(['js', '1'])
        if (r.exitCode !== 0) throw new Error(`js 1 exited ${r.exitCode}`)
      }
    }))
    const t2 = performance.now()
    await client.kill({ labels: { bench: 'python-ts' } })
    return { create_ms: t1 - t0, exec_ms: t2 - t1, per_s: COUNT / ((t2 - t0) / 1000) }
  } finally {
    await client.close()
  }
}

function pythonClient (url: string, token: string): Figures {
  const r = spawnSync('/usr/bin/python3', ['-c', PYTHON_CLIENT, String(COUNT), String(IN_FLIGHT)], {
    cwd: root,
    env: { ...process.env, PYTHONPATH: join(root, 'python', 'src'), WARREN_URL: url, WARREN_TOKEN: token, WARREN_CONFIG: join(dir, 'none.json') },
    encoding: 'utf8',
    timeout: 300_000
  })
  if (r.status !== 0) throw new Error(`the Python client failed (exit ${r.status ?? r.signal}): ${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Figures
}

const round = (f: Figures): Figures => ({ create_ms: Math.round(f.create_ms), exec_ms: Math.round(f.exec_ms), per_s: Math.round(f.per_s) })

async function main (): Promise<void> {
  progress('starting warren up')
  const { url, token } = await startUp()
  // Warm up both (JIT, pools, the node's function workers) before measuring.
  progress('warm-up')
  await tsClient(url, token)
  progress(`TS client: create_many(${COUNT}) and one exec each`)
  const ts = await tsClient(url, token)
  progress(`Python client: create_many(${COUNT}) and one exec each`)
  const py = pythonClient(url, token)
  progressDone()
  console.log(JSON.stringify({
    bench: 'python',
    sandboxes: COUNT,
    in_flight: IN_FLIGHT,
    backend: 'function',
    ts: round(ts),
    python: round(py),
    python_vs_ts: Number((py.per_s / ts.per_s).toFixed(2))
  }))
}

try {
  await main()
} finally {
  if (up !== undefined && up.exitCode === null && up.signalCode === null) {
    const exited = new Promise((resolve) => up!.once('exit', resolve))
    up.kill('SIGTERM')
    await exited
  }
  rmSync(dir, { recursive: true, force: true })
}
