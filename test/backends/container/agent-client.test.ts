/**
 * The agent client against an agent that lies: a microVM's agent runs under the tenant's root,
 * so what it answers is checked, never trusted. A stand-in agent on a Unix socket answers `execs`
 * with malformed entries and more of them than any agent keeps, and sends output past its credit.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Packr, Unpackr } from 'msgpackr'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { AgentLimits, connectAgent } from '../../../src/backends/container/index.js'
import { ErrorCodes, isWarrenError } from '../../../src/errors.js'
import { timed } from '../../support/index.js'

const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false })

/** Serves one connection, answering each request's frame with what `answer` makes of it (none, one or more frames). */
function fakeAgent (path: string, answer: (req: Record<string, unknown>) => Record<string, unknown> | Array<Record<string, unknown>>): { close: () => Promise<void> } {
  const sockets = new Set<Socket>()
  const server = createServer((s) => {
    sockets.add(s)
    let buf = Buffer.alloc(0)
    s.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk])
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const n = buf.readUInt32BE(0)
        const req = unpackr.unpack(buf.subarray(4, 4 + n)) as Record<string, unknown>
        buf = buf.subarray(4 + n)
        const answered = answer(req)
        for (const m of Array.isArray(answered) ? answered : [answered]) {
          const body = packr.pack(m)
          const head = Buffer.alloc(4)
          head.writeUInt32BE(body.length, 0)
          s.write(Buffer.concat([head, body]))
        }
      }
    })
  })
  server.listen(path)
  return {
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

test('listExecs keeps only well-formed entries, at most as many as an agent keeps', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-agent-lies-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const good = (id: number): Record<string, unknown> => ({ id, tag: `t${id}`, pid: 10 + id, seq: 5, acked: 2, ended: false, attached: false })
  const bad: unknown[] = [
    null, 7, 'x', [],
    { ...good(1), id: -1 }, { ...good(1), id: 1.5 }, { ...good(1), tag: '' }, { ...good(1), tag: 'x'.repeat(AgentLimits.maxTag + 1) },
    { ...good(1), tag: 42 }, { ...good(1), acked: 6 }, { ...good(1), ended: 'no' }, { ...good(1), seq: Number.MAX_VALUE }
  ]
  const many = Array.from({ length: AgentLimits.maxExecs + 50 }, (_, i) => good(100 + i))
  const agent = fakeAgent(join(dir, 'a.sock'), (req) => req.t === 'execs' ? { t: 'ok', id: req.id, execs: [...bad, good(2), ...many] } : { t: 'ok', id: req.id })
  defer(() => agent.close())
  const client = await connectAgent(join(dir, 'a.sock'))
  defer(() => client.close())
  const listed = await client.listExecs()
  assert.is(listed.length, AgentLimits.maxExecs)
  assert.equal(listed[0], good(2))
  assert.ok(listed.every((x) => typeof x.tag === 'string' && x.acked <= x.seq))
}))

test('an agent that sends output past the credit it was given is cut off: the node holds none of it', timed(10_000, async (defer) => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-agent-lies-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const out = (id: unknown, seq: number, bytes: number): Record<string, unknown> => ({ t: 'out', id, seq, fd: 1, data: Buffer.alloc(bytes, 'x') })
  // Exec 'honest' stays within its window and the grant; 'greedy' sends 1,200 bytes on a window of 1,000.
  let greedy = false
  const agent = fakeAgent(join(dir, 'a.sock'), (req) => {
    if (req.t === 'exec' && (req.argv as string[])[0] === 'honest') return [{ t: 'started', id: req.id, pid: 7 }, out(req.id, 0, 1000)]
    if (req.t === 'credit') return [out(req.id, 1, 600), { t: 'exit', id: req.id, seq: 2, code: 0, durationMs: 1 }]
    if (req.t === 'exec') { greedy = true; return [{ t: 'started', id: req.id, pid: 8 }, out(req.id, 0, 600), out(req.id, 1, 600)] }
    return []
  })
  defer(() => agent.close())
  const client = await connectAgent(join(dir, 'a.sock'))
  defer(() => client.close())
  let honestBytes = 0
  const honest = client.startExec(['honest'], { windowBytes: 1000 }, { onStdout: (b) => { honestBytes += b.length; if (honestBytes === 1000) honest.grant(1000) } })
  assert.is((await honest.result).exitCode, 0)
  assert.is(honestBytes, 1600, 'all it was granted')
  let greedyBytes = 0
  const cut = await client.exec(['greedy'], { windowBytes: 1000 }, { onStdout: (b) => { greedyBytes += b.length } }).catch((e: unknown) => e)
  assert.ok(greedy)
  assert.ok(isWarrenError(cut, ErrorCodes.PROTOCOL_VIOLATION), String(cut))
  assert.is(greedyBytes, 600, 'nothing past the credit reached the handler')
  await client.ended
  assert.ok(client.closed, 'the connection to that agent is ended')
}))

test.run()
