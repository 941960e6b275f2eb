import Database from 'better-sqlite3'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { NameIndex, NameIndexDefaults } from '../../src/images/index.js'
import { MIGRATIONS, openState, SCHEMA_VERSION, StateDefaults } from '../../src/state/index.js'
import { TrajectoryStore } from '../../src/cluster/index.js'

function tempDir (): string {
  return mkdtempSync(join(tmpdir(), 'warren-state-unit-'))
}

const digest = (i: number): string => `sha256:${i.toString(16).padStart(64, '0')}`

test('a new database is WAL, synchronous=FULL, at the schema version, and readable by its owner only', () => {
  const dir = tempDir()
  try {
    const state = openState(dir)
    assert.is(state.db.pragma('journal_mode', { simple: true }), 'wal')
    assert.is(state.db.pragma('synchronous', { simple: true }), 2) // FULL
    assert.is(state.db.pragma('user_version', { simple: true }), SCHEMA_VERSION)
    state.close()
    assert.is(statSync(join(dir, StateDefaults.fileName)).mode & 0o777, 0o600)
    // A second open runs no migration again and keeps the version.
    const again = openState(dir)
    assert.is(again.db.pragma('user_version', { simple: true }), SCHEMA_VERSION)
    again.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a database from a newer warren is refused naming the file', () => {
  const dir = tempDir()
  try {
    const file = join(dir, StateDefaults.fileName)
    const db = new Database(file)
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`)
    db.close()
    try {
      openState(dir).close()
      assert.unreachable('opened')
    } catch (err) {
      assert.ok(isWarrenError(err))
      assert.is(err.code, ErrorCodes.STATE_UNREADABLE)
      assert.is(err.details?.file, file)
      assert.match(err.message, /newer/)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a retagged name keeps its earlier digests newest first, up to the history length', () => {
  const state = openState(undefined)
  try {
    const names = new NameIndex(state.db)
    names.tag('py:3.11', digest(0), 'base')
    names.tag('py:3.11', digest(0), 'base') // the same digest again adds no history
    const second = names.tag('py:3.11', digest(1), 'base')
    assert.equal(second.history.map((h) => h.digest), [digest(0)])
    for (let i = 2; i < NameIndexDefaults.historyLength + 10; i++) names.tag('py:3.11', digest(i), 'base')
    const [listed] = names.list()
    const last = NameIndexDefaults.historyLength + 9
    assert.is(listed!.digest, digest(last))
    assert.is(listed!.history.length, NameIndexDefaults.historyLength)
    assert.is(listed!.history[0]!.digest, digest(last - 1))
    assert.is(names.resolve('py:3.11'), digest(last))
  } finally {
    state.close()
  }
})

test('migration 8 counts the steps of trajectories stored before it, so a tenant\'s quota sees them', () => {
  const dir = tempDir()
  try {
    const db = new Database(join(dir, StateDefaults.fileName))
    for (const m of MIGRATIONS.filter((x) => x.version <= 7)) db.exec(m.sql)
    db.pragma('user_version = 7')
    db.prepare("INSERT INTO trajectories (sandbox_id, tenant, header, created_at) VALUES ('a', 't', x'80', 1)").run()
    db.prepare("INSERT INTO trajectory_steps VALUES ('a', 0, 1, 'exec', 1, zeroblob(1000)), ('a', 1, 1, 'exec', 2, zeroblob(234))").run()
    db.close()
    const state = openState(dir)
    assert.is(new TrajectoryStore(state.db).bytesOf('t'), 1234)
    state.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test.run()
