/**
 * The jail of `js` processes, from inside: code that holds `process` (as code that escaped `vm`
 * would) runs in exactly the jail the pool builds, and finds nothing to gain there.
 */
import { spawn } from 'node:child_process'
import { openSync, closeSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { jailCommand, JsJailDefaults, SECCOMP_FD } from '../../../src/backends/function/js/jail.js'
import { timed } from '../../support/index.js'

const ENTRY = fileURLToPath(new URL('../../../src/backends/function/js/child-main.js', import.meta.url))

/** Runs as the jailed node's script (`node -e`), with every power of Node at hand. */
const PROBE = String.raw`
const fs = require('node:fs'), net = require('node:net'), cp = require('node:child_process'), os = require('node:os')
const tryIt = (f) => { try { return f() } catch (e) { return 'refused ' + (e.code ?? e.message) } }
const out = {
  uid: process.getuid(), euid: process.geteuid(), gid: process.getgid(), groups: process.getgroups(),
  root: fs.readdirSync('/').sort(),
  shadow: tryIt(() => fs.readFileSync('/etc/shadow', 'utf8').length),
  proc: tryIt(() => fs.readdirSync('/proc').length),
  writeRoot: tryIt(() => fs.writeFileSync('/x', 'x')),
  writeWarren: tryIt(() => fs.writeFileSync('/warren/x', 'x')),
  setuid: tryIt(() => { process.setuid(0); return process.getuid() }),
  spawn: tryIt(() => String(cp.spawnSync('/warren/bin/node', ['-e', '1']).error?.code ?? 'ran')),
  interfaces: tryIt(() => Object.keys(os.networkInterfaces()))
}
const s = net.connect(80, '127.0.0.1')
s.on('error', (e) => { out.connect = 'refused ' + e.code; console.log(JSON.stringify(out)) })
s.on('connect', () => { out.connect = 'connected'; console.log(JSON.stringify(out)); s.destroy() })
`

test('code holding process in the jail: not root, no host files, no writes, no network, no way back to root', timed(20_000, async () => {
  const command = jailCommand(JsJailDefaults, ['-e', PROBE], ENTRY, [])
  if (typeof command === 'string') throw new Error(command)
  const fd = openSync(command.seccompPath, 'r')
  const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'pipe', 'pipe', 'ignore']
  stdio[SECCOMP_FD] = fd
  const child = spawn(command.file, command.args, { stdio, env: {} })
  closeSync(fd)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (b: Buffer) => { stdout += b.toString() })
  child.stderr!.on('data', (b: Buffer) => { stderr += b.toString() })
  const code = await new Promise((resolve) => child.once('close', resolve))
  assert.is(code, 0, stderr)
  const r = JSON.parse(stdout) as Record<string, unknown>
  if (process.getuid?.() === 0) {
    assert.is(r.uid, JsJailDefaults.uid)
    assert.is(r.euid, JsJailDefaults.uid)
    assert.is(r.gid, JsJailDefaults.gid)
  }
  assert.equal(r.root, ['lib', 'lib64', 'usr', 'warren'].filter((d) => (r.root as string[]).includes(d)).sort())
  assert.not.ok((r.root as string[]).some((d) => ['etc', 'root', 'home', 'proc', 'tmp', 'dev', 'var'].includes(d)), String(r.root))
  for (const key of ['shadow', 'proc', 'writeRoot', 'writeWarren', 'setuid', 'connect']) assert.match(String(r[key]), /^refused/, key)
  // Even listing interfaces needs a socket, which the filter refuses.
  assert.match(String(r.interfaces), /^refused/, 'interfaces')
}))

test.run()
