/**
 * `warren audit` against a real `warren up`: what was done is printed as a table and as JSON
 * lines, filtered; `warren up` logs JSON lines on stderr (not a terminal) at its --log-level.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { timed } from '../support/index.js'
import { warren, warrenUp } from './support.js'

test('warren audit prints what was done, as a table and as JSON lines; a bad --limit names the field', timed(60_000, async (defer) => {
  const up = await warrenUp(defer)
  const { env } = up
  const ran = await warren(['run', '--label', 'k=v', '--', 'js', 'console.log("audited")'], { env })
  assert.is(ran.status, 0, ran.stderr)
  const token = await warren(['token', 'create', '--tenant', 'team-c', '--scopes', 'sandbox:read'], { env })
  assert.is(token.status, 0, token.stderr)

  const table = await warren(['audit'], { env })
  assert.is(table.status, 0, table.stderr)
  const lines = table.stdout.trimEnd().split('\n')
  assert.match(lines[0]!, /^TIME\s+ACTION\s+TENANT\s+KEY\s+OUTCOME\s+MS\s+DETAILS$/)
  const actions = lines.slice(1).map((l) => l.split(/\s+/)[1])
  assert.equal(actions, ['sandbox.create', 'exec', 'sandbox.kill', 'token.create'], table.stdout)
  assert.match(lines[2]!, /\d{4}-\d\d-\d\dT\S+Z\s+exec\s+admin\s+[0-9a-z]{12}\s+ok\s+\d+\s+sandbox=[0-9a-z]{16} exec=\S+ argv=\["js","console.log\(\\"audited\\"\)"\]/)
  assert.match(lines[4]!, /token\.create\s+admin\s+\S+\s+ok\s+\d+\s+tenant=team-c scopes=sandbox:read key=[0-9a-z]{12}$/)

  const json = await warren(['audit', '--json', '--action', 'sandbox', '--since', '1h'], { env })
  assert.is(json.status, 0, json.stderr)
  const records = json.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { action: string, outcome: string, tenant: string })
  assert.equal(records.map((r) => `${r.action} ${r.outcome} ${r.tenant}`), ['sandbox.create ok admin', 'sandbox.kill ok admin'])

  const bad = await warren(['audit', '--limit', '0'], { env })
  assert.is(bad.status, 1)
  assert.match(bad.stderr, /WARREN_ERR_INVALID_ARGUMENT/)
  assert.match(bad.stderr, /limit/)

  // The server's own log: JSON lines on stderr (a pipe here), the node's join among them.
  const logLines = up.banner.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string, level: string })
  assert.ok(logLines.some((l) => l.msg === 'node joined' && l.level === 'info'), up.banner)
}))

test('warren up refuses a --log-level it does not know, naming the flag', timed(30_000, async () => {
  const r = await warren(['up', '--port', '0', '--log-level', 'loud', '--data-dir', '/nonexistent/never-made'])
  assert.is(r.status, 1)
  assert.match(r.stderr, /log-level must be one of trace, debug, info, warn, error, silent/)
}))

test.run()
