/**
 * Finding 5, limits beyond the machine. Every size a tenant asks for is bounded: a spec beyond
 * the cluster's configured maximum, a fraction where whole numbers are meant, an env name that
 * could set another variable, an unbounded list: each refused with WARREN_ERR_BAD_SPEC naming the
 * field (once they were accepted, or ended as ACTOR_STOPPED). A spec within the maximum that no
 * joined node could ever hold (`memoryMiB: 200000` on a 24 GiB node) is WARREN_ERR_NO_CAPACITY
 * at once, not after the placement deadline.
 */
import { cpus, totalmem } from 'node:os'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { ErrorCodes, type ErrorCode } from '../../src/errors.js'
import type { Client, CreateSpec } from '../../src/sdk/index.js'
import { timed } from '../support/index.js'
import { refusal, specCluster } from './spec-helpers.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`spec-limits tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

const WEEK = 7 * 24 * 3_600_000
const machineMiB = Math.floor(totalmem() / 1024 / 1024)

/** Specs each refused as malformed, with the field the refusal must name. */
const MALFORMED: Array<[string, Record<string, unknown>]> = [
  ['limits.memoryMiB', { backend: 'container', limits: { memoryMiB: 1.5 } }],
  ['limits.memoryMiB', { backend: 'container', limits: { memoryMiB: 0 } }],
  ['limits.memoryMiB', { backend: 'container', limits: { memoryMiB: '512' } }],
  ['limits.memoryMiB', { backend: 'container', limits: { memoryMiB: 2 * 1024 * 1024 } }],
  ['limits.pids', { backend: 'container', limits: { pids: 4_000_000 } }],
  ['limits.pids', { backend: 'container', limits: { pids: 64.5 } }],
  ['limits.pids', { backend: 'container', limits: { pids: 0 } }],
  ['limits.diskMiB', { backend: 'container', limits: { diskMiB: 100.25 } }],
  ['limits.diskMiB', { backend: 'container', limits: { diskMiB: 0 } }],
  ['limits.diskMiB', { backend: 'container', limits: { diskMiB: 64 * 1024 * 1024 } }],
  ['limits.cpus', { backend: 'container', limits: { cpus: 0.001 } }],
  ['limits.cpus', { backend: 'container', limits: { cpus: 1000 } }],
  ['limits.cpus', { backend: 'container', limits: { cpus: Infinity } }],
  ['limits.swap', { backend: 'container', limits: { swap: 1 } }],
  ['ttlMs', { backend: 'function', ttlMs: 1000.5 }],
  ['ttlMs', { backend: 'function', ttlMs: 0 }],
  ['ttlMs', { backend: 'function', ttlMs: WEEK + 1 }],
  ['idleTimeoutMs', { backend: 'function', idleTimeoutMs: -1 }],
  ['idleTimeoutMs', { backend: 'function', idleTimeoutMs: 10.5 }],
  ['idleTimeoutMs', { backend: 'function', idleTimeoutMs: WEEK + 1 }],
  ['image', { backend: 'function', image: { base: 'busybox' } }],
  ['env.A=B', { backend: 'container', env: { 'A=B': 'x' } }],
  ['env.', { backend: 'container', env: { '': 'x' } }],
  ['env.A\0B', { backend: 'container', env: { 'A\0B': 'x' } }],
  ['env.A', { backend: 'container', env: { A: 'x\0y' } }],
  ['env.A', { backend: 'container', env: { A: 1 } }],
  ['env', { backend: 'container', env: Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`V${i}`, ''])) }],
  ['labels.', { backend: 'function', labels: { '': 'v' } }],
  ['labels.k', { backend: 'function', labels: { k: 'x'.repeat(257) } }],
  [`labels.${'k'.repeat(257)}`, { backend: 'function', labels: { ['k'.repeat(257)]: 'v' } }],
  ['labels.k\0', { backend: 'function', labels: { 'k\0': 'v' } }],
  ['labels.k', { backend: 'function', labels: { k: 'v\0' } }],
  ['labels', { backend: 'function', labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }],
  ['image.base', { backend: 'container', image: { base: `a${'b'.repeat(256)}:v1` } }],
  ['image.tools', { backend: 'container', image: { base: 'busybox', tools: Array.from({ length: 17 }, (_, i) => `t${i}:v1`) } }],
  ['image.tag', { backend: 'container', image: { base: 'busybox', tag: 'x' } }]
]

ctest('sizes, fractions, env names, labels and lists beyond their bounds are refused as BAD_SPEC naming the field', timed(120_000, async (defer) => {
  const { tenant } = await specCluster(defer, 'sl1')
  for (const [field, spec] of MALFORMED) {
    const err = await refusal(tenant.create({ ...spec, deadlineMs: 2000 } as CreateSpec))
    const what = `${field}: ${JSON.stringify(spec).slice(0, 120)}`
    assert.ok(err !== undefined, `${what} was accepted`)
    assert.is(err.code, ErrorCodes.BAD_SPEC, `${what}: ${err.code} ${err.message}`)
    assert.is((err.details as { field?: string } | undefined)?.field, field, `${what}: ${err.message}`)
  }
  // The bounds themselves are accepted: a whole week, an idle time as long, the largest env.
  const edge = await tenant.create({ backend: 'function', ttlMs: WEEK, idleTimeoutMs: WEEK, env: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`V${i}`, ''])) })
  await edge.kill()
}))

ctest('count and deadlineMs of a create are refused outside their bounds and accepted at them', timed(120_000, async (defer) => {
  const { tenant } = await specCluster(defer, 'sl2')
  const cases: Array<[string, Record<string, unknown>]> = [
    ['count', { count: 0 }], ['count', { count: 1001 }], ['count', { count: 1.5 }], ['count', { count: '2' }],
    ['deadlineMs', { deadlineMs: -1 }], ['deadlineMs', { deadlineMs: 1.5 }], ['deadlineMs', { deadlineMs: 120_001 }], ['deadlineMs', { deadlineMs: 'soon' }]
  ]
  for (const [field, extra] of cases) {
    const err = await refusal(tenant.request({ type: 'create', spec: { backend: 'function' }, ...extra } as Parameters<Client['request']>[0]))
    assert.ok(err !== undefined, `${JSON.stringify(extra)} was accepted`)
    assert.is(err.code, ErrorCodes.INVALID_ARGUMENT, `${JSON.stringify(extra)}: ${err.code} ${err.message}`)
    assert.is((err.details as { field?: string } | undefined)?.field, field)
  }
  const many = await tenant.createMany(1000, { backend: 'function', deadlineMs: 120_000 })
  assert.is(many.length, 1000)
  await Promise.all(many.map((sb) => sb.kill()))
  await (await tenant.create({ backend: 'function', deadlineMs: 0 })).kill()
}))

ctest('a spec no joined node could ever hold is NO_CAPACITY in well under the placement deadline, naming the limit', timed(120_000, async (defer) => {
  const { tenant } = await specCluster(defer, 'sl3')
  const beyond: Array<[string, CreateSpec]> = [
    ['limits.memoryMiB', { backend: 'container', limits: { memoryMiB: machineMiB + 1 } }],
    ['limits.memoryMiB', { backend: 'function', limits: { memoryMiB: machineMiB + 1 } }],
    ['limits.cpus', { backend: 'container', limits: { cpus: cpus().length + 1 } }],
    ['limits.diskMiB', { backend: 'container', limits: { diskMiB: machineMiB + 1 } }]
  ]
  for (const [field, spec] of beyond) {
    const started = Date.now()
    const err = await refusal(tenant.create({ ...spec, deadlineMs: 10_000 }))
    const took = Date.now() - started
    assert.ok(err !== undefined, `${field} beyond the node was accepted`)
    assert.is(err.code as ErrorCode, ErrorCodes.NO_CAPACITY, `${field}: ${err.code} ${err.message}`)
    assert.is((err.details as { field?: string } | undefined)?.field, field, err.message)
    // Refused from what the node said it has, not by waiting out the 10 s deadline.
    assert.ok(took < 2000, `${field}: refused after ${took} ms`)
  }
  // What the machine can hold is still placed, and the session took no harm.
  const sb = await tenant.create({ backend: 'container', limits: { memoryMiB: 64, cpus: 0.5 } })
  assert.is((await sb.exec(['echo', 'fine'])).stdout, 'fine\n')
  await sb.kill()
}))

test.run()
