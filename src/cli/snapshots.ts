/**
 * The snapshot commands of `warren`: snapshot, snapshots, snapshot-rm, fork and hibernate. Each
 * prints what a script needs (ids, one a line) and returns the process exit code.
 */
import { withClient } from './client.js'
import { writeTable } from './columns.js'
import type { Out } from './commands.js'
import { parseLabels } from './sandbox-flags.js'
import { parseNumber } from './units.js'

const std: Out = { stdout: process.stdout, stderr: process.stderr }

/** `warren snapshot ID [--name N:T] [--memory]`: prints the new snapshot's id. */
export async function snapshot (id: string, flags: { name?: string, memory?: boolean }, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const sb = await client.attach(id)
    const snap = await sb.snapshot({ ...(flags.name !== undefined ? { name: flags.name } : {}), ...(flags.memory === true ? { memory: true } : {}) })
    out.stdout.write(`${snap.id}\n`)
    return 0
  })
}

/** `warren snapshots [--sandbox ID]`: the tenant's snapshots, newest first. */
export async function snapshots (flags: { sandbox?: string }, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const list = await client.snapshots(flags.sandbox !== undefined ? { sandboxId: flags.sandbox } : {})
    const rows = [['ID', 'NAME', 'SANDBOX', 'LAYERS', 'BYTES', 'AGE', 'PARENT']]
    for (const s of list) {
      rows.push([s.id, s.name ?? '-', s.sandboxId, String(s.layers.length), String(s.bytes), `${Math.round((Date.now() - s.createdAt) / 1000)}s`, s.parent ?? '-'])
    }
    writeTable(out.stdout, rows)
    return 0
  })
}

/** `warren snapshot-rm ID_OR_NAME`: prints the deleted snapshot's id. */
export async function snapshotRm (ref: string, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    out.stdout.write(`${(await client.deleteSnapshot(ref)).id}\n`)
    return 0
  })
}

/** `warren fork ID N [--label K=V] [--memory]`: prints each new sandbox's id, a line each; a fork that failed goes to stderr (exit 1). */
export async function fork (id: string, n: string, flags: { label?: string[], memory?: boolean }, out: Out = std): Promise<number> {
  const count = parseNumber(n, 'N', { whole: true }, 'count')
  const labels = parseLabels(flags.label)
  return await withClient(async (client) => {
    const sb = await client.attach(id)
    const r = await sb.fork(count, labels !== undefined ? { labels } : undefined, flags.memory === true ? { memory: true } : {})
    let failed = 0
    for (const o of r.outcomes) {
      if (o.ok) { out.stdout.write(`${o.sandbox.id}\n`); continue }
      failed++
      out.stderr.write(`warren: fork: ${o.error.code}: ${o.error.message}\n`)
    }
    return failed === 0 ? 0 : 1
  })
}

/** `warren hibernate ID`: prints the id of the snapshot it resumes from (`warren resume ID` brings it back). */
export async function hibernate (id: string, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const view = await (await client.attach(id)).hibernate()
    out.stdout.write(`${view.snapshot ?? ''}\n`)
    return 0
  })
}
