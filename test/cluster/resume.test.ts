/**
 * Upgrades and crashes lose nothing: a command that outlives its node agent (kill -9) goes on
 * running in the sandbox, and the client's output stream resumes from its last seq, byte-exact.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { connect } from '../../src/sdk/index.js'
import { timed, waitFor } from '../support/index.js'
import { ALL_SCOPES, spawnNode, startTestControlPlane } from './harness.js'

const why = containerUnavailable()
if (why !== undefined) console.log(`resume tests skipped: ${why}`)
const ctest = why === undefined ? test : test.skip

/** A numbered line every 10 ms, `n` of them (busybox sh: no seq). */
function numbered (n: number): string {
  return `i=0; while [ $i -lt ${n} ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done`
}

/** Every line `line 0` .. `line n-1` once, in order: where it first goes wrong, else undefined. */
function firstWrong (text: string, n: number): string | undefined {
  const lines = text.split('\n')
  if (lines.pop() !== '') return 'the output does not end with a newline'
  for (let i = 0; i < n; i++) if (lines[i] !== `line ${i}`) return `line ${i} is ${JSON.stringify(lines[i])}`
  return lines.length === n ? undefined : `${lines.length} lines, not ${n}`
}

ctest('kill -9 the node agent mid-command, restart it: every line arrives once, in order', timed(180_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-rs-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const first = await spawnNode(cp, 'rs1', join(dir, 'node'))
  defer(() => first.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('t', [...ALL_SCOPES]) })
  defer(() => client.close())
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill().catch(() => {}))

  const n = 2000 // 20 s at one line per 10 ms (more, with the shell's own cost)
  const run = sb.spawn(['sh', '-c', numbered(n)])
  let text = ''
  const reading = (async () => {
    for await (const chunk of run) text += new TextDecoder().decode(chunk.data)
  })()
  await waitFor(() => text.includes('line 200\n'), 30_000, 'the command under way')
  await first.kill('SIGKILL')
  const cut = text.split('\n').length
  await waitFor(() => sb.state === 'lost', 10_000, 'lost with its node')
  const second = await spawnNode(cp, 'rs1', join(dir, 'node'))
  defer(() => second.kill())
  await waitFor(() => sb.state === 'ready', 20_000, 'ready again')
  await reading
  const result = await run.wait()
  assert.is(firstWrong(text, n), undefined, `cut at about line ${cut}`)
  assert.is(result.exitCode, 0)
}))

test.run()
