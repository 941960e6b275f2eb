/**
 * The agent's descriptor of the writable layer (fd 5, agent/sandbox.h): the host reads the upper
 * through it; nothing inside the sandbox can, and no command inherits it. And the copy a
 * snapshot stages on the host is out of reach of host users, whatever the sandbox made.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as assert from 'uvu/assert'
import { test } from 'uvu'
import { UPPER_FD, upperPath } from '../../../src/backends/container/launcher.js'
import { cutSnapshot } from '../../../src/backends/container/snapshot.js'
import { timed } from '../../support/index.js'
import { registerLeftoverCheck, run, sandboxTest, sh, startSandbox } from './helpers.js'

sandboxTest('the host reads the upper through the agent\'s descriptor, for a tmpfs upper and for diskMiB 0', timed(15_000, async (defer) => {
  for (const diskMiB of [64, 0]) {
    const { sb, client } = await startSandbox(defer, { diskMiB })
    await sh(client, 'echo written > /f')
    assert.is(readFileSync(join(upperPath(sb), 'f'), 'utf8'), 'written\n')
    if (diskMiB === 0) assert.is(readFileSync(join(sb.upperDir, 'u', 'f'), 'utf8'), 'written\n', 'with diskMiB 0 it is the host directory itself')
  }
}))

sandboxTest('inside, the agent\'s descriptor of the upper cannot be followed, read or listed through, by root or any user', timed(15_000, async (defer) => {
  const { client } = await startSandbox(defer)
  await sh(client, 'echo secret > /f')
  for (const who of [{}, { uid: 1000, gid: 1000 }]) {
    for (const probe of [`ls /proc/1/fd/${UPPER_FD}`, `ls /proc/1/fd/${UPPER_FD}/`, `readlink /proc/1/fd/${UPPER_FD}`, `cat /proc/1/fd/${UPPER_FD}/u/f`, `cd /proc/1/fd/${UPPER_FD}`]) {
      const r = await run(client, ['sh', '-c', probe], who)
      assert.is.not(r.result.exitCode, 0, `${probe} (${JSON.stringify(who)}) succeeded: ${r.stdout}`)
      assert.is(r.stdout, '', probe)
      // busybox readlink fails silently; the others say why.
      if (r.stderr !== '') assert.match(r.stderr, /Permission denied/, probe)
    }
  }
  // Close-on-exec: no command holds it.
  const fds = (await sh(client, 'ls /proc/$$/fd')).split('\n').filter((l) => l !== '')
  assert.not.ok(fds.includes(String(UPPER_FD)), `the shell's descriptors: ${fds.join(' ')}`)
}))

sandboxTest('a snapshot\'s staging copy sits in a 0700 directory even when the sandbox opened its root to all and made a setuid file', timed(30_000, async (defer) => {
  const { sb, client } = await startSandbox(defer)
  await sh(client, 'chmod 777 / && cp /bin/busybox /suid && chmod 4755 /suid')
  const store = mkdtempSync(join(tmpdir(), 'warren-stage-'))
  defer(() => rmSync(store, { recursive: true, force: true }))
  let seen: { guard: number, tree: number, suid: number } | undefined
  const layer = await cutSnapshot(sb, store, {
    whileFrozen: async (work) => {
      const r = await work()
      const [guard] = readdirSync(store).filter((n) => n.startsWith('.stage-'))
      const dir = join(store, guard!)
      seen = { guard: statSync(dir).mode & 0o7777, tree: statSync(join(dir, 'tree')).mode & 0o7777, suid: statSync(join(dir, 'tree', 'suid')).mode & 0o7777 }
      return r
    }
  })
  assert.equal(seen, { guard: 0o700, tree: 0o777, suid: 0o4755 }, 'the copy keeps the modes; its parent keeps host users out')
  assert.equal(readdirSync(store), [`${layer.digest.slice(7)}.erofs`], 'only the layer is left')
}))

registerLeftoverCheck()

test.run()
