/**
 * A stand-in agent on a Unix socket for tests of the node's side: it answers each request frame
 * with what the test makes of it, as a guest that speaks for itself would (a microVM's agent is
 * the tenant's).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Packr, Unpackr } from 'msgpackr'
import { connectAgent, type AgentClient } from '../../../src/backends/container/index.js'

const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false })

/** Serves one connection, answering each request's frame with what `answer` makes of it (none, one or more frames). */
export function fakeAgent (path: string, answer: (req: Record<string, unknown>) => Record<string, unknown> | Array<Record<string, unknown>>): { close: () => Promise<void> } {
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

/** A fake agent answering one kind of request with `reply` (the rest with a bare ok), and a client of it. */
export async function lyingAgent (defer: (fn: () => unknown) => void, kind: string, reply: (req: Record<string, unknown>) => Record<string, unknown> | Array<Record<string, unknown>>): Promise<AgentClient> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-agent-lies-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const agent = fakeAgent(join(dir, 'a.sock'), (req) => req.t === kind ? reply(req) : { t: 'ok', id: req.id })
  defer(() => agent.close())
  const client = await connectAgent(join(dir, 'a.sock'))
  defer(() => client.close())
  return client
}
