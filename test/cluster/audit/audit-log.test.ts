import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { cappedArgv } from '../../../src/cluster/audit/actions.js'
import { Collector } from '../../../src/cluster/audit/query.js'
import { AuditDefaults, AuditLog, type AuditRecord } from '../../../src/cluster/index.js'
import { isWarrenError } from '../../../src/errors.js'
import { createLogger } from '../../../src/log/index.js'
import { timed } from '../../support/index.js'
import { captureLog } from '../../support/log-capture.js'

const rec = (i: number, extra: Partial<AuditRecord> = {}): AuditRecord => ({ at: 1_000_000 + i, action: 'exec', tenant: 't', keyId: 'k', outcome: 'ok', ms: 1, sandbox: `sb${i % 3}`, ...extra })

function tmp (defer: (fn: () => unknown) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-audit-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

test('rotation bounds the disk: no file past maxFileBytes, keepFiles rotated ones, the oldest gone; a query reads across them in order', timed(10_000, async (defer) => {
  const dir = tmp(defer)
  const log = new AuditLog({ dir, log: createLogger({ level: 'silent' }), tunables: { maxFileBytes: 2000, keepFiles: 2 } })
  for (let i = 0; i < 200; i++) log.append(rec(i))
  await log.close()
  const files = log.files()
  assert.equal(files.map((f) => f.slice(dir.length + 1)), ['audit.log.2', 'audit.log.1', 'audit.log'])
  for (const f of files) assert.ok(statSync(f).size <= 2000, `${f}: ${statSync(f).size}`)
  const lines = files.flatMap((f) => readFileSync(f, 'utf8').trimEnd().split('\n')).map((l) => JSON.parse(l) as AuditRecord)
  // What is kept is the newest records, contiguous, in order.
  assert.is(lines.at(-1)!.at, 1_000_199)
  lines.forEach((r, i) => { if (i > 0) assert.is(r.at, lines[i - 1]!.at + 1) })
  assert.ok(lines.length < 200, 'the oldest were rotated away')
  const reopened = new AuditLog({ dir, log: createLogger({ level: 'silent' }), tunables: { maxFileBytes: 2000, keepFiles: 2 } })
  const page = await reopened.query({ limit: 5 })
  assert.equal(page.records.map((r) => r.at), [1_000_195, 1_000_196, 1_000_197, 1_000_198, 1_000_199])
  assert.is(page.truncated, true)
  // A restarted log goes on in the same file up to its bound.
  reopened.append(rec(200))
  await reopened.close()
  for (const f of reopened.files()) assert.ok(statSync(f).size <= 2000)
}))

test('a full queue drops records instead of waiting: counted, logged, and written into the log as audit.dropped', timed(10_000, async (defer) => {
  const dir = tmp(defer)
  const out = captureLog()
  const log = new AuditLog({ dir, log: createLogger({ level: 'info', destination: out }), tunables: { maxQueuedRecords: 5 } })
  for (let i = 0; i < 50; i++) log.append(rec(i))
  assert.ok(log.dropped > 0 && log.dropped < 50, String(log.dropped))
  const dropped = log.dropped
  await log.query({})
  log.append(rec(50))
  await log.close()
  const lines = readFileSync(join(dir, 'audit.log'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as AuditRecord)
  assert.is(lines.length, 50 - dropped + 2)
  const gap = lines.at(-2)!
  assert.equal([gap.action, gap.dropped], ['audit.dropped', dropped])
  assert.is(lines.at(-1)!.at, 1_000_050)
  const logged = out.records().filter((r) => /audit records dropped/.test(r.msg))
  assert.is(logged.length, 1, 'at most one line a second however many drop')
  assert.is(logged[0]!.level, 'error')
}))

test('queries: filters by tenant, action or its group, sandbox (also in a list), since and until; the newest within limit', timed(10_000, async () => {
  const log = new AuditLog({ log: createLogger({ level: 'silent' }), tunables: { maxMemoryRecords: 10 } })
  for (let i = 0; i < 25; i++) log.append(rec(i, i % 2 === 0 ? { tenant: 'a', action: 'sandbox.create' } : { tenant: 'b', action: 'sandbox.kill', sandboxes: ['x', 'y'] }))
  const all = await log.query({})
  assert.equal(all.records.map((r) => r.at - 1_000_000), [15, 16, 17, 18, 19, 20, 21, 22, 23, 24], 'the newest ten are kept in memory')
  assert.equal((await log.query({ tenant: 'a' })).records.map((r) => r.at - 1_000_000), [16, 18, 20, 22, 24])
  assert.is((await log.query({ action: 'sandbox' })).records.length, 10)
  assert.is((await log.query({ action: 'sandbox.kill' })).records.length, 5)
  assert.is((await log.query({ action: 'sand' })).records.length, 0, 'a group is a whole word')
  assert.is((await log.query({ sandbox: 'y' })).records.length, 5)
  assert.equal((await log.query({ since: 1_000_020, until: 1_000_023 })).records.map((r) => r.at - 1_000_000), [20, 21, 22])
  const two = await log.query({ limit: 2 })
  assert.equal([two.records.map((r) => r.at - 1_000_000), two.truncated], [[23, 24], true])
}))

test('an answer is bounded in bytes as in count, and queries reading at once are bounded', timed(10_000, async (defer) => {
  const c = new Collector({ limit: 1000 }, 1000)
  for (let i = 0; i < 100; i++) c.offer(rec(i), 300)
  const page = c.page()
  assert.is(page.records.length, 3)
  assert.is(page.records.at(-1)!.at, 1_000_099)
  assert.is(page.truncated, true)
  const log = new AuditLog({ dir: tmp(defer), log: createLogger({ level: 'silent' }) })
  defer(() => log.close())
  const runs = Array.from({ length: AuditDefaults.maxConcurrentQueries + 1 }, async () => await log.query({}))
  const settled = await Promise.allSettled(runs)
  const refused = settled.filter((s) => s.status === 'rejected')
  assert.is(refused.length, 1)
  assert.ok(isWarrenError((refused[0] as PromiseRejectedResult).reason, 'WARREN_ERR_OVERLOADED'))
}))

test('an exec\'s argv is kept up to 1 KiB in all, marked when cut', () => {
  assert.equal(cappedArgv(['ls', '-l']), { argv: ['ls', '-l'] })
  const long = cappedArgv(['sh', '-c', 'x'.repeat(5000), 'more'])
  assert.is(long.argv!.join('').length, AuditDefaults.maxArgvChars)
  assert.is(long.argvTruncated, true)
  assert.equal(long.argv!.slice(0, 2), ['sh', '-c'])
})

test.run()
