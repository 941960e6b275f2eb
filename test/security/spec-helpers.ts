/**
 * Helpers of the spec attacks (host-paths, spec-limits): a real cluster with a tenant's client
 * and an operator's credentials, the `warren` CLI run as a child process, and a create whose
 * refusal is the result (a create that wrongly succeeds is killed, and the test then fails).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ControlPlane } from '../../src/cluster/index.js'
import type { WarrenError } from '../../src/errors.js'
import { isWarrenError } from '../../src/errors.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { ALL_SCOPES, repoRoot, spawnNode, startTestControlPlane, type NodeChild } from '../cluster/harness.js'

export interface SpecCluster {
  dir: string
  cp: ControlPlane
  node: NodeChild
  /** The node's data directory (its layer store is under container/layers). */
  nodeDir: string
  /** The control plane's blob store root. */
  blobs: string
  /** A tenant's client: sandbox scopes only. */
  tenant: Client
  /** Environment for the CLI as the operator (an admin key). */
  operatorEnv: NodeJS.ProcessEnv
}

/** A control plane with a blob store, one `warren node` process, a tenant and an operator. */
export async function specCluster (defer: (fn: () => unknown) => void, nodeId: string, nodeArgs: string[] = ['--no-lazy-layers']): Promise<SpecCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-sec-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp') })
  defer(() => cp.close())
  const nodeDir = join(dir, 'node')
  const node = await spawnNode(cp, nodeId, nodeDir, nodeArgs)
  defer(() => node.kill())
  const tenant = await connect({ url: cp.url, token: await cp.createToken('tenant-a', [...ALL_SCOPES]) })
  defer(() => tenant.close())
  const operatorEnv = { ...process.env, WARREN_URL: cp.url, WARREN_TOKEN: await cp.createToken('ops', ['admin']), WARREN_CONFIG: join(dir, 'no-config.json') }
  return { dir, cp, node, nodeDir, blobs: join(dir, 'cp', 'blobs'), tenant, operatorEnv }
}

/** Runs `warren ARGS…` without blocking this process (the control plane lives in it). */
export function runCli (args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null, stdout: string, stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repoRoot, 'bin', 'warren.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
    child.once('error', reject)
    child.once('close', (status) => resolve({ status, stdout, stderr }))
  })
}

/**
 * The error a request ends with. A create that was not refused is killed at once (so nothing it
 * made outlives the test) and reported as `undefined`, which the caller's assertion then fails on.
 */
export async function refusal (attempt: Promise<unknown>): Promise<WarrenError | undefined> {
  try {
    const made = await attempt
    for (const sb of Array.isArray(made) ? made : [made]) {
      if (sb !== null && typeof sb === 'object' && 'kill' in sb) await (sb as { kill (): Promise<void> }).kill().catch(() => {})
    }
    return undefined
  } catch (err) {
    if (isWarrenError(err)) return err
    throw err
  }
}

/** Every file under `root` with its size, for "nothing was built here" checks. */
export function filesUnder (root: string): string[] {
  const out: string[] = []
  const walk = (d: string): void => {
    let names: string[]
    try { names = readdirSync(d) } catch { return }
    for (const name of names) {
      const p = join(d, name)
      const s = statSync(p, { throwIfNoEntry: false })
      if (s === undefined) continue
      if (s.isDirectory()) walk(p)
      else out.push(`${p.slice(root.length)} ${s.size}`)
    }
  }
  walk(root)
  return out.sort()
}
