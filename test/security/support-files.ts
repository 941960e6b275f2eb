/**
 * What the file-transfer attack tests share: a real cluster (control plane here, one `warren
 * node` child whose memory is measured), a container sandbox of an ordinary tenant, and a raw
 * authenticated link of the same tenant, to send file requests the SDK never would.
 */
import { readFileSync } from 'node:fs'
import { SESSION_ADDRESS } from '../../src/cluster/index.js'
import { isWarrenError, type WarrenError } from '../../src/errors.js'
import type { Sandbox } from '../../src/sdk/index.js'
import { createLinkClient, type LinkClient } from '../../src/transport/index.js'
import { ALL_SCOPES, type NodeChild } from '../cluster/harness.js'
import { tenantCluster } from './support.js'

/** The resident memory of a process, from /proc. */
export function rssOf (pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (m === null) throw new Error(`no VmRSS for ${pid}`)
  return Number(m[1]) * 1024
}

/** A tenant's container sandbox, its node, and a raw link speaking as the same tenant; `second`, another sandbox of the node. */
export interface FilesTarget {
  sb: Sandbox
  second: Sandbox
  node: NodeChild
  nodePid: number
  link: LinkClient
  /** A `files` request on `sb`, sent raw. */
  files (req: Record<string, unknown>, timeoutMs?: number): Promise<unknown>
}

const LIMITS = { memoryMiB: 256, cpus: 1, diskMiB: 1024 }

/** Starts a cluster with one node child, creates a container sandbox (two with `second`), and opens a raw link as its tenant. */
export async function filesTarget (defer: (fn: () => unknown) => void, nodeId: string, o: { second?: boolean } = {}): Promise<FilesTarget> {
  const { cp, node, client } = await tenantCluster(defer, nodeId)
  const sb = await client.create({ backend: 'container', limits: LIMITS })
  defer(() => sb.kill())
  const second = o.second === true ? await client.create({ backend: 'container', limits: LIMITS }) : sb
  if (second !== sb) defer(() => second.kill())
  const link = createLinkClient({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => link.close())
  await link.connect()
  const files = async (req: Record<string, unknown>, timeoutMs = 30_000): Promise<unknown> =>
    await link.request(SESSION_ADDRESS, { type: 'files', id: sb.id, ...req }, { timeoutMs })
  return { sb, second, node, nodePid: node.proc.pid!, link, files }
}

/** The rejection of `p`, or undefined when it resolved. */
export async function rejection (p: Promise<unknown>): Promise<WarrenError | undefined> {
  return await p.then(() => undefined, (err: unknown) => {
    if (isWarrenError(err)) return err
    throw err
  })
}

/** A ustar header block: `name`, one type flag, and a body of `size` bytes. */
export function tarHeader (name: string, type: string, size: number): Buffer {
  const h = Buffer.alloc(512)
  h.write(name, 0, 100, 'utf8')
  h.write('0000644\0', 100)
  h.write('0000000\0', 108)
  h.write('0000000\0', 116)
  h.write(size.toString(8).padStart(11, '0') + '\0', 124)
  h.write('00000000000\0', 136)
  h.write(type, 156)
  h.write('ustar\0', 257)
  h.write('00', 263)
  h.write('        ', 148)
  let sum = 0
  for (const b of h) sum += b
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148)
  return h
}
