/**
 * deploy/systemd: both units pass `systemd-analyze verify` where it runs (the binary they start
 * stood in by a stub, since /opt/warren is not installed here), and hold the settings a node
 * needs: cgroup delegation, a restart policy, KillMode=process so sandboxes outlive an agent
 * restart, a high file limit, the data dir under /var/lib/warren, the token from an
 * EnvironmentFile and never on the command line. A unit with a wrong key fails verify.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../cluster/harness.js'

const units = ['warren-up.service', 'warren-node.service']
const ANALYZE = '/usr/bin/systemd-analyze'

/** `[Section]` → key → values (a key may repeat). */
function parseUnit (text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>()
  let current: Map<string, string[]> | undefined
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const head = /^\[(.+)\]$/.exec(line)
    if (head !== null) { current = new Map(); sections.set(head[1]!, current); continue }
    const eq = line.indexOf('=')
    assert.ok(current !== undefined && eq > 0, `a key=value line in a section: ${line}`)
    const key = line.slice(0, eq).trim()
    current!.set(key, [...(current!.get(key) ?? []), line.slice(eq + 1).trim()])
  }
  return sections
}

/** Runs verify on `text` as unit `name`, ExecStart's node replaced by a stub that exists. */
function verify (name: string, text: string): { ok: boolean, out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'warren-units-'))
  try {
    const stubbed = text.replace('/usr/bin/node /opt/warren/bin/warren.js', process.execPath)
    writeFileSync(join(dir, name), stubbed)
    const r = spawnSync(ANALYZE, ['verify', '--man=no', join(dir, name)], { encoding: 'utf8', timeout: 60_000 })
    // Complaints about the files it names that are not on this machine are not the unit's fault.
    const out = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim() !== '' && !/EnvironmentFile|\/etc\/warren|network-online|Failed to connect|Failed to prepare filename|System has not been booted with systemd/.test(l)).join('\n')
    // verify exits 0 on an unknown key or a bad value (it only warns): what it says is the verdict.
    return { ok: out === '', out }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const analyze = existsSync(ANALYZE) ? test : test.skip

for (const name of units) {
  test(`${name}: delegation, restart, KillMode=process, limits, data dir, token from an EnvironmentFile`, () => {
    const text = readFileSync(join(repoRoot, 'deploy', 'systemd', name), 'utf8')
    const unit = parseUnit(text)
    const s = unit.get('Service')!
    const one = (k: string): string | undefined => s.get(k)?.[0]
    assert.is(one('Delegate'), 'yes')
    assert.is(one('Restart'), 'on-failure')
    assert.is(one('KillMode'), 'process')
    assert.ok(Number(one('LimitNOFILE')) >= 65536, `LimitNOFILE ${one('LimitNOFILE')}`)
    assert.match(one('EnvironmentFile') ?? '', /^\/etc\/warren\/.+\.env$/)
    const exec = one('ExecStart') ?? ''
    assert.match(exec, /--data-dir \/var\/lib\/warren\//)
    assert.not.match(exec, /--token|wrnj_|wrn_/, 'no token on the command line')
    assert.is(one('StateDirectory'), 'warren')
    assert.ok(unit.get('Install')?.get('WantedBy')?.includes('multi-user.target'))
    if (name === 'warren-node.service') assert.match(exec, /--join \$\{WARREN_JOIN_URL\}/)
    if (name === 'warren-up.service') assert.match(exec, /--tls-cert \S+ --tls-key \S+/)
  })

  analyze(`${name}: systemd-analyze verify finds nothing wrong, and does find a wrong key`, () => {
    const text = readFileSync(join(repoRoot, 'deploy', 'systemd', name), 'utf8')
    const good = verify(name, text)
    assert.ok(good.ok, good.out)
    const bad = verify(name, text.replace('KillMode=process', 'KillMode=process\nKilMode=process\nRestart=sometimes'))
    assert.not.ok(bad.ok, 'a misspelled key and a bad value pass verify')
    assert.match(bad.out, /KilMode|Restart/)
  })
}

test.run()
