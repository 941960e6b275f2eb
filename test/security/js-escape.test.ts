/**
 * Finding 6 (untrusted JavaScript ran as root): a tenant's `js` code tries the known ways out of
 * `vm` and reads its own stack; the process running it, looked at from the host, is jailed.
 * Through the public SDK against a real control plane and node process.
 */
import { existsSync, readFileSync, readlinkSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import type { Client } from '../../src/sdk/index.js'
import { descendantsOf, timed, waitFor } from '../support/index.js'
import { repoRoot, type NodeChild } from '../cluster/harness.js'
import { tenantCluster } from './support.js'

/** A real cluster and a tenant's client; `dataDir` is the node's data dir, which jailed code must not see. */
async function cluster (defer: (fn: () => unknown) => void): Promise<{ client: Client, node: NodeChild, dataDir: string }> {
  const { dir, node, client } = await tenantCluster(defer, 'n1')
  return { client, node, dataDir: join(dir, 'node') }
}

/**
 * Each way out tried from inside; when one yields `process`, what it can then do is printed
 * too. The script prints one JSON line: per attempt, 'refused: …' or what the escape gained.
 */
const ESCAPES = String.raw`
const out = {}
const gained = (p) => {
  const r = { uid: p.getuid(), gid: p.getgid() }
  const fs = (() => { try { return p.getBuiltinModule?.('fs') ?? p.mainModule?.require('fs') ?? p.binding('fs') } catch (e) { return undefined } })()
  r.shadow = (() => { try { return fs.readFileSync('/etc/shadow', 'utf8').length } catch (e) { return 'refused' } })()
  r.spawn = (() => { try { return String(p.binding('spawn_sync').spawn({ file: '/bin/sh', args: ['sh', '-c', 'id'], stdio: [] }).status) } catch (e) { return 'refused' } })()
  return r
}
const attempts = {
  thisConstructor: () => this.constructor.constructor('return process')(),
  objectConstructor: () => ({}).constructor.constructor('return process')(),
  consoleConstructor: () => console.log.constructor('return process')(),
  argsConstructor: () => args.constructor.constructor('return process')(),
  asyncFunction: () => (async () => {}).constructor('return process')(),
  generatorFunction: () => (function * () {}).constructor('return process')(),
  callSites: () => {
    let found
    Error.prepareStackTrace = (e, sites) => {
      for (const s of sites) {
        for (const v of [s.getThis?.(), s.getFunction?.()]) {
          if (v === undefined || v === null) continue
          try { found = v.constructor.constructor('return process')() } catch (_) {}
          if (found === undefined && typeof v.process === 'object') found = v.process
        }
      }
      return ''
    }
    void new Error().stack
    Error.prepareStackTrace = undefined
    if (found === undefined) throw new Error('no host object in any frame')
    return found
  },
  globalProcess: () => { if (typeof process === 'undefined') throw new Error('no process global'); return process }
}
for (const [name, attempt] of Object.entries(attempts)) {
  try {
    const p = attempt()
    out[name] = p !== null && typeof p === 'object' && typeof p.getuid === 'function' ? gained(p) : 'refused: ' + typeof p
  } catch (e) {
    out[name] = 'refused: ' + String(e && e.message)
  }
}
console.log(JSON.stringify(out))
`

test('the known ways out of vm give nothing; one that gave process would find no root, no files, no spawn', timed(60_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create({ backend: 'function' })
  const r = await sb.exec(['js', ESCAPES], { timeoutMs: 10_000 })
  assert.is(r.exitCode, 0, r.stderr)
  const results = JSON.parse(r.stdout) as Record<string, unknown>
  for (const [name, result] of Object.entries(results)) {
    if (typeof result === 'string') {
      assert.match(result, /^refused/, name)
      continue
    }
    const gained = result as { uid: number, gid: number, shadow: unknown, spawn: unknown }
    assert.not.equal(gained.uid, 0, `${name}: uid`)
    assert.is(gained.shadow, 'refused', `${name}: /etc/shadow`)
    assert.is(gained.spawn, 'refused', `${name}: spawn`)
  }
}))

test('stacks seen from inside name no host path', timed(60_000, async (defer) => {
  const { client } = await cluster(defer)
  const sb = await client.create({ backend: 'function' })
  const source = `
    console.log(new Error('plain').stack)
    Error.prepareStackTrace = (e, sites) => sites.map((s) => String(s.getFileName()) + ' ' + String(s.getScriptNameOrSourceURL?.())).join('\\n')
    console.log(new Error('structured').stack)
    Error.prepareStackTrace = undefined
    null.boom
  `
  const r = await sb.exec(['js', source], { timeoutMs: 10_000 })
  assert.is(r.exitCode, 1)
  const text = r.stdout + r.stderr
  assert.match(r.stdout, /structured|js/)
  assert.not.ok(text.includes('/dist/'), text)
  assert.not.ok(text.includes(repoRoot), text)
  // Every file a frame names is the script, a builtin, or warren's code under the neutral /warren.
  for (const m of text.matchAll(/file:\/\/\S+|(?:^|[\s(])(\/[^\s:)]+)/gm)) {
    const path = m[0].trim().replace(/^\(/, '')
    assert.ok(path.startsWith('file:///warren/') || path.startsWith('/warren/'), `host path in a stack: ${path}\n${text}`)
  }
}))

/** The `js` child processes below `pid`: node running child-main.js (jailed, it is below bwrap). */
function jsChildrenBelow (pid: number): number[] {
  return descendantsOf(pid).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'node' && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('child-main.js')
    } catch { return false }
  })
}

function statusField (pid: number, field: string): string {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`))
  return line?.slice(field.length + 1).trim() ?? ''
}

test('seen from the host, the process running tenant code is jailed: no root, no capabilities, seccomp, own namespaces, no host files', timed(60_000, async (defer) => {
  if (process.getuid?.() !== 0) return // inspecting another uid's process needs root
  const { client, node, dataDir } = await cluster(defer)
  const sb = await client.create({ backend: 'function' })
  const spinning = sb.exec(['js', 'console.log("spinning"); for (;;) {}'], { timeoutMs: 30_000, onStdout: () => {} })
  // Its rejection is handled from the start: the kill ends it before the defer could await it.
  const settled = spinning.catch(() => {})
  defer(async () => { await sb.kill(); await settled })
  const children = await waitFor(() => { const c = jsChildrenBelow(node.proc.pid!); return c.length > 0 ? c : undefined }, 15_000, 'a js process')
  for (const pid of children) {
    const uids = statusField(pid, 'Uid').split(/\s+/).map(Number)
    assert.ok(uids.every((u) => u !== 0), `uids ${uids.join(' ')}`)
    assert.is(statusField(pid, 'CapEff'), '0000000000000000')
    assert.is(statusField(pid, 'CapBnd'), '0000000000000000')
    assert.is(statusField(pid, 'NoNewPrivs'), '1')
    assert.is(statusField(pid, 'Seccomp'), '2')
    for (const ns of ['mnt', 'net', 'pid', 'ipc', 'uts']) {
      assert.not.equal(readlinkSync(`/proc/${pid}/ns/${ns}`), readlinkSync(`/proc/self/ns/${ns}`), `own ${ns} namespace`)
    }
    const root = `/proc/${pid}/root`
    for (const hostPath of ['/etc/shadow', '/root', '/proc/1', '/tmp', dataDir, join(homedir(), '.warren'), repoRoot]) {
      assert.not.ok(existsSync(join(root, hostPath)), `${hostPath} is visible to the child`)
    }
  }
}))

test.run()
