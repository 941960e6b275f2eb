import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { busyboxTree } from '../cluster/harness.js'
import { connect } from '../../src/sdk/index.js'
import { timed } from '../support/index.js'
import { cli, exited, warrenUp } from './support.js'

test('warren up writes a 0600 config; run streams output and exits with the command\'s code; ps lists; SIGTERM stops', timed(60_000, async (defer) => {
  const up = await warrenUp(defer)
  const { env, dir } = up
  assert.match(up.banner, /url:\s+ws:\/\/127\.0\.0\.1:\d+/)
  assert.match(up.banner, /token:\s+wrn_/)
  assert.is(statSync(join(dir, 'config.json')).mode & 0o777, 0o600)

  // spawnSync would block this process's event loop; the control plane lives in another one.
  const ok = spawnSync(process.execPath, [cli, 'run', '--label', 'k=v', '--', 'js', 'console.log("hello")'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(ok.status, 0, ok.stderr)
  assert.is(ok.stdout, 'hello\n')
  const failing = spawnSync(process.execPath, [cli, 'run', '--', 'js', 'console.error("bad"); throw new Error("no")'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(failing.status, 1)
  assert.match(failing.stderr, /bad/)
  // ps lists live sandboxes; the ended one shows with --all.
  const ps = spawnSync(process.execPath, [cli, 'ps', '--label', 'k=v'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(ps.status, 0, ps.stderr)
  assert.not.match(ps.stdout, /gone/)
  assert.is(ps.stdout.trim().split('\n').length, 1, 'the header only')
  const psAll = spawnSync(process.execPath, [cli, 'ps', '--all', '--label', 'k=v'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(psAll.status, 0, psAll.stderr)
  assert.match(psAll.stdout, /gone\(killed\)\s+function/)
  const missing = spawnSync(process.execPath, [cli, 'exec', 'nosuchsandbox', '--', 'js', '1'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(missing.status, 1)
  assert.match(missing.stderr, /WARREN_ERR_NOT_FOUND/)
  // The calibration plays 300 sandboxes on this cluster and in the simulator; whether the figures
  // agree is the calibration test's matter (test/sim), here the command's output is.
  const cal = spawnSync(process.execPath, [cli, 'sim', 'calibrate'], { env, encoding: 'utf8', timeout: 60_000 })
  assert.ok(cal.status === 0 || cal.status === 1, cal.stderr)
  assert.match(cal.stdout, /create latency p50 \(ms\)\s+real\s+[\d.]+\s+simulated\s+[\d.]+/)
  assert.match(cal.stdout, /peak concurrent\s+real\s+\d+/)
  // warren log: what was run in a sandbox.
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { url: string, token: string }
  // The SDK in this process is closed before the spawnSync calls block its event loop.
  const sdk = await connect(config)
  const kept = await sdk.create({ backend: 'function', ttlMs: 60_000 })
  await kept.exec(['js', 'console.log("logged")'])
  await sdk.close()
  const logged = spawnSync(process.execPath, [cli, 'log', kept.id], { env, encoding: 'utf8', timeout: 30_000 })
  const killed = spawnSync(process.execPath, [cli, 'kill', kept.id, 'nosuchsandbox'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(killed.status, 1, 'one of the two could not be killed')
  assert.is(killed.stdout, `${kept.id}\n`)
  assert.match(killed.stderr, /nosuchsandbox: WARREN_ERR_NOT_FOUND/)
  assert.is(logged.status, 0, logged.stderr)
  assert.match(logged.stdout, new RegExp(`^sandbox ${kept.id} \\(function\\) of admin on \\S+, created \\S+\n`))
  assert.match(logged.stdout, /#0 \S+ exec \["js","console.log\(\\"logged\\"\)"\] exit 0 in \d+ ms, 7 B out, 0 B err\n  out\| logged\n/, logged.stdout)
  // After the kill too, and as JSON lines: the header, then a step each, bytes as base64.
  const json = spawnSync(process.execPath, [cli, 'log', kept.id, '--json'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(json.status, 0, json.stderr)
  const [header, step, ...rest] = json.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>)
  assert.is(header!.sandboxId, kept.id)
  assert.is(step!.kind, 'exec')
  assert.is(Buffer.from(step!.stdout.data as string, 'base64').toString(), 'logged\n')
  assert.equal(rest, [])
  const usage = spawnSync(process.execPath, [cli, 'frobnicate'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(usage.status, 2)

  up.proc.kill('SIGTERM')
  assert.equal(await exited(up.proc), { status: 0, signal: null })
}))

// The sim costs ~21 s of CPU whatever the duration (its starting population); on a loaded 2-core
// machine that took past 50 s, so the limits leave room: this test is about the output, not speed.
test('warren sim prints the table and writes the HTML report and the JSON summary', timed(150_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cli-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const r = spawnSync(process.execPath, [cli, 'sim', '--nodes', '4', '--cores-per-node', '64', '--mem-per-node', '256GiB', '--duration', '10m', '--seed', '7',
    '--report', join(dir, 'r.html'), '--json', join(dir, 's.json')], { encoding: 'utf8', timeout: 140_000 })
  assert.is(r.status, 0, r.stderr)
  assert.match(r.stdout, /simulated\s+0\.2 h on 4 nodes/)
  assert.match(r.stdout, /create latency\s+p50/)
  const html = readFileSync(join(dir, 'r.html'), 'utf8')
  assert.match(html, /<svg/)
  const summary = JSON.parse(readFileSync(join(dir, 's.json'), 'utf8')) as { seed: number, nodes: number }
  assert.is(summary.seed, 7)
  assert.is(summary.nodes, 4)
  const trace = join(dir, 't.jsonl')
  writeFileSync(trace, [
    { t: 0, op: 'create', id: 'a', spec: { backend: 'container', limits: { cpus: 1, memoryMiB: 512 }, image: { base: 'base:1' } } },
    { t: 10, op: 'create', id: 'b', spec: { backend: 'container', limits: { cpus: 1, memoryMiB: 512 }, image: { base: 'base:1' } } },
    { t: 500, op: 'kill', id: 'a' }
  ].map((e) => JSON.stringify(e)).join('\n') + '\n')
  const replay = spawnSync(process.execPath, [cli, 'sim', '--nodes', '2', '--trace', trace], { encoding: 'utf8', timeout: 30_000 })
  assert.is(replay.status, 0, replay.stderr)
  assert.match(replay.stdout, /created\s+2 of 2/)
  writeFileSync(trace, '{"t": 0, "op": "create"}\n')
  const badTrace = spawnSync(process.execPath, [cli, 'sim', '--trace', trace], { encoding: 'utf8', timeout: 30_000 })
  assert.is(badTrace.status, 1)
  assert.match(badTrace.stderr, /line 1/)
  const bad = spawnSync(process.execPath, [cli, 'sim', '--duration', 'forever'], { encoding: 'utf8', timeout: 10_000 })
  assert.is(bad.status, 1)
  assert.match(bad.stderr, /WARREN_ERR_INVALID_ARGUMENT/)
  // Failures: nodes fall silent until the registry notices, shards restart. With a 12 s timeout,
  // beats every 4 s and checks every 2 s, a crash is noticed after (12 - 4, 12 + 2] s.
  const failing = spawnSync(process.execPath, [cli, 'sim', '--nodes', '4', '--cores-per-node', '64', '--mem-per-node', '256GiB', '--duration', '30m', '--seed', '3',
    '--node-crashes-per-day', '60', '--shard-crashes-per-day', '48', '--heartbeat-timeout', '12s', '--json', join(dir, 'f.json')], { encoding: 'utf8', timeout: 50_000 })
  assert.is(failing.status, 0, failing.stderr)
  const f = JSON.parse(readFileSync(join(dir, 'f.json'), 'utf8')) as { nodeCrashes: number, shardCrashes: number, lossDetectionMs: { max: number }, overPromised: number }
  assert.ok(f.nodeCrashes > 0 && f.shardCrashes > 0, JSON.stringify(f).slice(0, 200))
  assert.ok(f.lossDetectionMs.max > 8_000 && f.lossDetectionMs.max <= 14_000, `noticed after ${f.lossDetectionMs.max} ms`)
  assert.is(f.overPromised, 0)
  const negative = spawnSync(process.execPath, [cli, 'sim', '--node-crashes-per-day=-1'], { encoding: 'utf8', timeout: 10_000 })
  assert.is(negative.status, 1)
  assert.match(negative.stderr, /--node-crashes-per-day must be at least 0, not "-1"/)
}))

const noContainers = containerUnavailable()
;(noContainers === undefined ? test : test.skip)('warren image build tags a layer that warren run --image then runs, pulled from the blob store', timed(120_000, async (defer) => {
  const { env, dir } = await warrenUp(defer)
  const data = join(dir, 'data')
  const tree = join(dir, 'tree')
  busyboxTree(tree, ['sh', 'cat'])
  writeFileSync(join(tree, 'greeting'), 'hello from a built image\n')
  const build = spawnSync(process.execPath, [cli, 'image', 'build', '--kind', 'base', '--name', 'greet:1', '--from-dir', tree, '--store', join(data, 'blobs')], { env, encoding: 'utf8', timeout: 60_000 })
  assert.is(build.status, 0, build.stderr)
  assert.match(build.stdout, /^sha256:[0-9a-f]{64} .* as greet:1\n$/)
  const again = spawnSync(process.execPath, [cli, 'image', 'build', '--kind', 'base', '--no-tag', '--from-dir', tree, '--store', join(data, 'blobs')], { env, encoding: 'utf8', timeout: 60_000 })
  assert.is(again.stdout.split(' ')[0], build.stdout.split(' ')[0], 'the same tree gives the same digest')
  // The same tree as a gzipped tar, applied inside a fresh root like an image layer: the same digest again.
  execFileSync('tar', ['-czf', join(dir, 'tree.tgz'), '-C', tree, '.'])
  const fromTar = spawnSync(process.execPath, [cli, 'image', 'build', '--kind', 'base', '--no-tag', '--from-tar', join(dir, 'tree.tgz'), '--store', join(data, 'blobs')], { env, encoding: 'utf8', timeout: 60_000 })
  assert.is(fromTar.status, 0, fromTar.stderr)
  assert.is(fromTar.stdout.split(' ')[0], build.stdout.split(' ')[0], 'a tar of the tree gives the same digest')
  const ran = spawnSync(process.execPath, [cli, 'run', '--image', 'greet:1', '--', 'cat', '/greeting'], { env, encoding: 'utf8', timeout: 60_000 })
  assert.is(ran.status, 0, ran.stderr)
  assert.is(ran.stdout, 'hello from a built image\n')
}))

test.run()
