/**
 * `memory` on snapshot and fork as it comes off the wire: true or false, anything else refused
 * naming `memory`; and the spec of a create can never carry a memory state of its own (only a
 * snapshot's record does), nor change a memory snapshot's machine (limits, backend).
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseClientRequest, parseSandboxSpec } from '../../../src/cluster/index.js'
import { overlaySpec } from '../../../src/cluster/control/snapshots.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'

function refused (fn: () => unknown, code: string): string | undefined {
  try {
    fn()
  } catch (err) {
    assert.ok(isWarrenError(err, code as never), String(err))
    return (err.details as { field?: string } | undefined)?.field
  }
  assert.unreachable('accepted')
  return undefined
}

test('snapshot and fork take memory: true or false', () => {
  assert.equal(parseClientRequest({ type: 'snapshot', id: 'abc', memory: true }), { type: 'snapshot', id: 'abc', memory: true })
  assert.equal(parseClientRequest({ type: 'snapshot', id: 'abc', memory: false }), { type: 'snapshot', id: 'abc', memory: false })
  assert.equal(parseClientRequest({ type: 'fork', id: 'abc', count: 2, memory: true }), { type: 'fork', id: 'abc', count: 2, memory: true })
  for (const memory of ['yes', 1, null, {}, [true]]) {
    assert.is(refused(() => parseClientRequest({ type: 'snapshot', id: 'abc', memory }), ErrorCodes.INVALID_ARGUMENT), 'memory', JSON.stringify(memory))
    assert.is(refused(() => parseClientRequest({ type: 'fork', id: 'abc', count: 1, memory }), ErrorCodes.INVALID_ARGUMENT), 'memory', JSON.stringify(memory))
  }
})

test('a client cannot send a memory state; over a memory snapshot neither limits nor another backend; a file system snapshot takes the other layered backend', () => {
  const state = { state: `sha256:${'a'.repeat(64)}`, vcpus: 1, memoryMiB: 192 }
  assert.is(refused(() => parseSandboxSpec({ backend: 'microvm', memory: state }), ErrorCodes.BAD_SPEC), 'memory')
  const vm = { ...parseSandboxSpec({ backend: 'microvm', limits: { memoryMiB: 192 } }), memory: state }
  assert.is(refused(() => overlaySpec(vm, { memory: state }), ErrorCodes.BAD_SPEC), 'memory')
  assert.is(refused(() => overlaySpec(vm, { limits: { memoryMiB: 256 } }), ErrorCodes.BAD_SPEC), 'limits')
  assert.is(refused(() => overlaySpec(vm, { backend: 'container' }), ErrorCodes.BAD_SPEC), 'backend')
  assert.is(overlaySpec(vm, { labels: { a: 'b' } }).memory, undefined, 'the state is the record\'s to lay on (onSnapshot), not the overlay\'s')
  const { memory: _m, ...files } = vm
  assert.is(overlaySpec(files, { backend: 'container' }).backend, 'container')
  const container = parseSandboxSpec({ backend: 'container' })
  assert.is(overlaySpec(container, { backend: 'microvm' }).backend, 'microvm')
  assert.is(refused(() => overlaySpec(container, { backend: 'function' }), ErrorCodes.BAD_SPEC), 'backend')
  // A fork of a VM asked for memory is checked as over a memory snapshot.
  assert.is(refused(() => overlaySpec(files, { limits: { cpus: 2 } }, true), ErrorCodes.BAD_SPEC), 'limits')
})

test.run()
