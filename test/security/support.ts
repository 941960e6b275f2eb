/**
 * What the security tests share: a real cluster (control plane here, one `warren node` child)
 * and a tenant client with an ordinary tenant key, all ended with the test.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { containerUnavailable, type ControlPlane } from '../../src/cluster/index.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { ALL_SCOPES, repoRoot, spawnNode, startTestControlPlane, type NodeChild } from '../cluster/harness.js'

/** Why container sandboxes cannot run here, or undefined. */
export const containerSkip: string | undefined = containerUnavailable()

/** A control plane, one node process and a tenant's client; `defer` ends them all. */
export async function tenantCluster (defer: (fn: () => unknown) => void, nodeId: string, nodeArgs: string[] = []): Promise<{ dir: string, cp: ControlPlane, node: NodeChild, client: Client }> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-sec-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane()
  defer(() => cp.close())
  const node = await spawnNode(cp, nodeId, join(dir, 'node'), nodeArgs)
  defer(() => node.kill())
  const client = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => client.close())
  return { dir, cp, node, client }
}

/** Compiles a C file of test/security/fixtures into a static binary under `dir`; returns its bytes. */
export function staticFixture (name: string, dir: string): Uint8Array {
  const src = join(repoRoot, 'test', 'security', 'fixtures', `${name}.c`)
  const out = join(dir, name)
  const r = spawnSync('gcc', ['-static', '-O2', '-o', out, src], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`gcc ${name}.c: ${r.stderr}`)
  return readFileSync(out)
}
