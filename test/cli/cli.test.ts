import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../cluster/harness.js'
import { timed } from '../support/index.js'

const cli = join(repoRoot, 'bin', 'warren.js')

test('warren up writes a 0600 config; run streams output and exits with the command\'s code; ps lists; SIGTERM stops', timed(60_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cli-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const env = { ...process.env, WARREN_CONFIG: join(dir, 'config.json') }
  const up = spawn(process.execPath, [cli, 'up', '--port', '0', '--data-dir', join(dir, 'data')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)))
  defer(async () => { if (up.exitCode === null) { up.kill('SIGKILL'); await exited } })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    up.stdout.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('Ctrl-C')) resolve() })
    up.stderr.on('data', (b: Buffer) => { out += b.toString() })
    up.once('exit', (code) => reject(new Error(`warren up exited ${code}: ${out}`)))
  })
  assert.match(out, /url:\s+ws:\/\/127\.0\.0\.1:\d+/)
  assert.match(out, /token:\s+wrn_/)
  assert.is(statSync(join(dir, 'config.json')).mode & 0o777, 0o600)

  // spawnSync would block this process's event loop; the control plane lives in another one.
  const ok = spawnSync(process.execPath, [cli, 'run', '--label', 'k=v', '--', 'js', 'console.log("hello")'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(ok.status, 0, ok.stderr)
  assert.is(ok.stdout, 'hello\n')
  const failing = spawnSync(process.execPath, [cli, 'run', '--', 'js', 'console.error("bad"); throw new Error("no")'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(failing.status, 1)
  assert.match(failing.stderr, /bad/)
  const ps = spawnSync(process.execPath, [cli, 'ps', '--label', 'k=v'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(ps.status, 0, ps.stderr)
  assert.match(ps.stdout, /gone\(killed\)\s+function/)
  const missing = spawnSync(process.execPath, [cli, 'exec', 'nosuchsandbox', '--', 'js', '1'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(missing.status, 1)
  assert.match(missing.stderr, /WARREN_ERR_NOT_FOUND/)
  const usage = spawnSync(process.execPath, [cli, 'frobnicate'], { env, encoding: 'utf8', timeout: 30_000 })
  assert.is(usage.status, 2)

  up.kill('SIGTERM')
  assert.is(await exited, 0)
}))

test.run()
