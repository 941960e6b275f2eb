/**
 * Finding: a tree download ended while its walk was inside a file (a page read, then `tar-end`,
 * a kill of the sandbox, or the idle sweep) crashed the node process: the packer's callback for
 * that file rejected a promise nothing awaited yet, an unhandled rejection, so every sandbox of
 * the node, whoever's, was lost with it, and the kill timed out. Ending a download mid-file ends
 * that download only.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { ErrorCodes, isWarrenError } from '../../src/errors.js'
import { timed } from '../support/index.js'
import { containerSkip } from './support.js'
import { filesTarget } from './support-files.js'

const ctest = containerSkip === undefined ? test : test.skip
if (containerSkip !== undefined) console.log(`tar download end tests skipped: ${containerSkip}`)

/** Bigger than a page, so the walk is inside the file when the first page is read. */
const FILE_BYTES = 4 * 1024 * 1024

for (const how of ['tar-end', 'kill'] as const) {
  ctest(`a tree download ended by ${how} inside a file ends only that download: the node lives, the sandbox answers`, timed(90_000, async (defer) => {
    const { sb, files, node, second } = await filesTarget(defer, `tarend-${how}`, { second: true })
    let nodeOut = ''
    node.proc.stderr?.on('data', (b: Buffer) => { nodeOut += b.toString() })
    await sb.files.write('/tmp/tree/big', new Uint8Array(FILE_BYTES))
    await files({ op: 'tar-begin', download: 'd', path: '/tmp/tree' })
    const page = await files({ op: 'tar-read', download: 'd', seq: 0 }) as { done: boolean }
    assert.is(page.done, false)
    if (how === 'tar-end') {
      await files({ op: 'tar-end', download: 'd' }, 10_000).catch((err: unknown) => { throw new Error(`tar-end: ${String(err)}; node exit ${String(node.proc.exitCode)}: ${nodeOut.slice(-600)}`) })
    }
    if (how === 'kill') await sb.kill()
    // Another sandbox of the node (another tenant's, as far as the node knows) still runs commands.
    const r = await second.exec(['sh', '-c', 'echo alive'], { timeoutMs: 20_000 }).catch((err: unknown) => {
      throw new Error(`${String(err)}; node exit ${String(node.proc.exitCode)}: ${nodeOut.slice(-600)}`)
    })
    assert.is(r.stdout, 'alive\n')
    assert.is(node.proc.exitCode, null)
    if (how === 'tar-end') {
      const again = await sb.exec(['sh', '-c', 'echo alive'], { timeoutMs: 20_000 })
      assert.is(again.stdout, 'alive\n')
      const err = await files({ op: 'tar-read', download: 'd', seq: 1 }).then(() => undefined, (e: unknown) => e)
      assert.ok(isWarrenError(err, ErrorCodes.NOT_FOUND), String(err))
    }
  }))
}

test.run()
