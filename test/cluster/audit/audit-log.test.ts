import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
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
  assert.equal(files.map((f) => f.slice(dir.length + 1)), ['audit/t.log.2', 'audit/t.log.1', 'audit/t.log'])
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
  const log = new AuditLog({ dir, log: createLogger({ level: 'info', destination: out }), tunables: { maxQueuedRecordsPerTenant: 5 } })
  for (let i = 0; i < 50; i++) log.append(rec(i))
  assert.ok(log.dropped > 0 && log.dropped < 50, String(log.dropped))
  const dropped = log.dropped
  await log.query({})
  log.append(rec(50))
  await log.close()
  const lines = readFileSync(join(dir, 'audit', 't.log'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as AuditRecord)
  assert.is(lines.length, 50 - dropped + 2)
  const gap = lines.at(-2)!
  assert.equal([gap.action, gap.dropped, gap.tenant], ['audit.dropped', dropped, 't'])
  assert.is(lines.at(-1)!.at, 1_000_050)
  const logged = out.records().filter((r) => /audit records dropped/.test(r.msg))
  assert.is(logged.length, 1, 'at most one line a second however many drop')
  assert.is(logged[0]!.level, 'error')
}))

test('one tenant\'s flood rotates and drops only its own records: another\'s stay, and an all-tenant query merges them by time', timed(10_000, async (defer) => {
  const dir = tmp(defer)
  const log = new AuditLog({ dir, log: createLogger({ level: 'silent' }), tunables: { maxFileBytes: 2000, keepFiles: 1, maxQueuedRecordsPerTenant: 20 } })
  log.append(rec(0, { tenant: 'quiet' }))
  // Far more than its queue and its files hold, at once: its own records drop and rotate away.
  for (let i = 1; i < 500; i++) log.append(rec(i, { tenant: 'loud' }))
  log.append(rec(500, { tenant: 'quiet' }))
  assert.ok(log.dropped > 0)
  await log.close()
  const quiet = await log.query({ tenant: 'quiet' })
  assert.equal([quiet.records.map((r) => r.at - 1_000_000), quiet.truncated], [[0, 500], false])
  const all = await log.query({ limit: 1000 })
  const ats = all.records.map((r) => r.at)
  assert.equal(ats, [...ats].sort((a, b) => a - b), 'oldest first across tenants')
  assert.equal([all.records[0]!.tenant, all.records.at(-1)!.tenant], ['quiet', 'quiet'])
  assert.ok(all.records.some((r) => r.tenant === 'loud'))
  assert.equal(readdirSync(join(dir, 'audit')).sort(), ['loud.log', 'loud.log.1', 'quiet.log'])
  for (const f of log.files()) assert.ok(statSync(f).size <= 2000, f)
  // The newest few across tenants: the last quiet one and the loud ones just before it.
  const last = await log.query({ limit: 3 })
  assert.equal([last.records.map((r) => r.tenant), last.truncated], [['loud', 'loud', 'quiet'], true])
}))

test('records of one millisecond from different tenants come back in the order they were written', timed(10_000, async (defer) => {
  const log = new AuditLog({ dir: tmp(defer), log: createLogger({ level: 'silent' }) })
  const order = ['b', 'a', 'c', 'a', 'b']
  order.forEach((tenant, i) => log.append({ ...rec(0, { tenant }), ms: i }))
  await log.close()
  assert.equal((await log.query({})).records.map((r) => r.ms), [0, 1, 2, 3, 4])
  assert.equal((await log.query({ limit: 2 })).records.map((r) => r.ms), [3, 4])
}))

test('a record appended while the writer closes its file is written, and a query waits for it', timed(20_000, async (defer) => {
  const log = new AuditLog({ dir: tmp(defer), log: createLogger({ level: 'silent' }) })
  defer(() => log.close())
  // The second record lands at every point of the first one's write (a few turns of the loop apart).
  for (let i = 0; i < 200; i++) {
    log.append(rec(2 * i))
    for (let k = 0; k < i % 8; k++) await new Promise((resolve) => setImmediate(resolve))
    log.append(rec(2 * i + 1))
    assert.is((await log.query({ limit: 1 })).records[0]?.at, 1_000_000 + 2 * i + 1, `round ${i}`)
  }
}))

test('the single audit.log of earlier versions is still read, by tenant too, and never written again', timed(10_000, async (defer) => {
  const dir = tmp(defer)
  writeFileSync(join(dir, 'audit.log'), JSON.stringify(rec(0, { tenant: 'old' })) + '\n' + JSON.stringify(rec(1, { tenant: 'other' })) + '\n')
  mkdirSync(join(dir, 'audit'))
  const log = new AuditLog({ dir, log: createLogger({ level: 'silent' }) })
  log.append(rec(2, { tenant: 'old' }))
  await log.close()
  assert.equal((await log.query({ tenant: 'old' })).records.map((r) => r.at - 1_000_000), [0, 2])
  assert.equal((await log.query({})).records.map((r) => r.tenant), ['old', 'other', 'old'])
  assert.is(readFileSync(join(dir, 'audit.log'), 'utf8').trimEnd().split('\n').length, 2)
}))

test('without a data dir each tenant keeps its newest records in memory', timed(10_000, async () => {
  const log = new AuditLog({ log: createLogger({ level: 'silent' }), tunables: { maxMemoryRecords: 3 } })
  log.append(rec(0, { tenant: 'quiet' }))
  for (let i = 1; i < 50; i++) log.append(rec(i, { tenant: 'loud' }))
  assert.equal((await log.query({})).records.map((r) => r.at - 1_000_000), [0, 47, 48, 49])
}))

test('queries: filters by tenant, action or its group, sandbox (also in a list), since and until; the newest within limit', timed(10_000, async () => {
  const log = new AuditLog({ log: createLogger({ level: 'silent' }), tunables: { maxMemoryRecords: 5 } })
  for (let i = 0; i < 25; i++) log.append(rec(i, i % 2 === 0 ? { tenant: 'a', action: 'sandbox.create' } : { tenant: 'b', action: 'sandbox.kill', sandboxes: ['x', 'y'] }))
  const all = await log.query({})
  assert.equal(all.records.map((r) => r.at - 1_000_000), [15, 16, 17, 18, 19, 20, 21, 22, 23, 24], 'the newest five of each tenant are kept in memory')
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
