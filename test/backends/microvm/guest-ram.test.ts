/**
 * A saved guest's RAM (guest-ram.ts): written by the one QEMU that maps it shared, sealed once
 * that QEMU has ended, and from then on unwritable by anyone, through any descriptor, while a
 * QEMU still maps it private. The finding it pins: a restored VM's QEMU held its template's RAM
 * file open read-write, so a QEMU a guest took over could change the pages other tenants' VMs
 * restored from it still shared.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { ftruncateSync, openSync, closeSync, readFileSync, readlinkSync, writeSync } from 'node:fs'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createGuestRam, GUEST_RAM_LINK, MicrovmDefaults, RAM_FD, RAM_PATH, type GuestRam } from '../../../src/backends/microvm/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed, waitFor } from '../../support/index.js'

const rtest = process.getuid?.() === 0 ? test : test.skip
const MIB = 1024 * 1024

/** A QEMU that maps `ram` (shared or private) and runs no vCPU; resolves once the mapping is there. */
async function qemuMapping (ram: GuestRam, share: boolean): Promise<ChildProcess> {
  const mib = ram.bytes / MIB
  const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'ignore', 'pipe', 'ignore', 'ignore']
  stdio[RAM_FD] = ram.fd
  const qemu = spawn(MicrovmDefaults.qemuPath, [
    '-M', 'microvm,x-option-roms=off,memory-backend=mem', '-accel', 'tcg', '-m', `${mib}M`, '-S',
    '-nodefaults', '-display', 'none', '-nic', 'none',
    '-object', `memory-backend-file,id=mem,size=${mib}M,mem-path=${RAM_PATH},share=${share ? 'on' : 'off'}`
  ], { stdio, env: {} })
  await waitFor(() => {
    try { return readFileSync(`/proc/${qemu.pid!}/maps`, 'utf8').includes(GUEST_RAM_LINK) } catch { return false }
  }, 20_000, 'QEMU to map the RAM')
  return qemu
}

const ended = (p: ChildProcess): Promise<void> => new Promise((resolve) => { if (p.exitCode !== null || p.signalCode !== null) resolve(); else p.once('exit', () => resolve()) })

rtest('the RAM cannot be sealed while a QEMU maps it shared; once it ended it is, and then nothing writes it, a private mapping still works', timed(60_000, async (defer) => {
  const ram = await createGuestRam(64 * MIB)
  defer(() => ram.close())
  writeSync(ram.fd, 'the template wrote this', 0)
  const writer = await qemuMapping(ram, true)
  defer(() => { writer.kill('SIGKILL') })
  const busy = await ram.seal().then(() => undefined, (err: unknown) => err)
  assert.ok(isWarrenError(busy) && busy.code === ErrorCodes.BACKEND_UNAVAILABLE, 'refused while mapped shared and writable')
  assert.not.ok(ram.sealed)
  writer.kill('SIGKILL')
  await ended(writer)
  await ram.seal()
  assert.ok(ram.sealed)

  const reader = await qemuMapping(ram, false)
  defer(() => { reader.kill('SIGKILL') })
  // As a QEMU a guest took over would try: through its own inherited descriptor, and reopened.
  const theirs = `/proc/${reader.pid!}/fd/${RAM_FD}`
  assert.ok(readlinkSync(theirs).startsWith(GUEST_RAM_LINK), readlinkSync(theirs))
  const reopened = openSync(theirs, 'r+')
  defer(() => closeSync(reopened))
  for (const [how, attempt] of [['the node\'s descriptor', () => writeSync(ram.fd, 'x', 0)], ['a reopened descriptor', () => writeSync(reopened, 'x', 4096)], ['truncation', () => ftruncateSync(reopened, 0)]] as const) {
    assert.throws(attempt, /EPERM/, `${how} is refused`)
  }
  assert.is(readFileSync(theirs).subarray(0, 23).toString(), 'the template wrote this')
}))

rtest('a size that is not whole pages is refused', timed(10_000, async () => {
  const err = await createGuestRam(4095).then(() => undefined, (e: unknown) => e)
  assert.ok(isWarrenError(err) && err.code === ErrorCodes.BACKEND_UNAVAILABLE)
  assert.match((err as Error).message, /multiple of 4096/)
}))

test.run()
