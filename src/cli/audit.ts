/**
 * `warren audit`: the control plane's audit log, read over the API (admin): who did what to
 * which sandbox, when, and how it ended. A table by default, JSON lines with --json.
 */
import type { AuditQuery, AuditRecord } from '../cluster/index.js'
import { withClient } from './client.js'
import { writeTable } from './columns.js'
import type { Out } from './commands.js'
import { parseMilliseconds, parseNumber } from './units.js'

export interface AuditFlags { tenant?: string, sandbox?: string, action?: string, since?: string, limit?: string, json?: boolean }

/** The flags as a query; `--since 1h` is an hour before now. */
export function auditQuery (flags: AuditFlags, now = Date.now()): AuditQuery {
  // The control plane checks the bound (and names it); the CLI only needs a number.
  const limit = flags.limit !== undefined ? parseNumber(flags.limit, '--limit', { whole: true }) : undefined
  return {
    ...(flags.tenant !== undefined ? { tenant: flags.tenant } : {}),
    ...(flags.sandbox !== undefined ? { sandbox: flags.sandbox } : {}),
    ...(flags.action !== undefined ? { action: flags.action } : {}),
    ...(flags.since !== undefined ? { since: now - parseMilliseconds(flags.since, 'since') } : {}),
    ...(limit !== undefined ? { limit } : {})
  }
}

/** What a record names besides its principal: ids, argv, paths, the target of a token or quota change. */
function detailsOf (r: AuditRecord): string {
  const parts: string[] = []
  if (r.sandbox !== undefined) parts.push(`sandbox=${r.sandbox}`)
  if (r.sandboxes !== undefined) parts.push(`sandboxes=${r.sandboxes.join(',')}${r.count !== undefined && r.count > r.sandboxes.length ? `,…(${r.count})` : ''}`)
  else if (r.count !== undefined) parts.push(`count=${r.count}`)
  if (r.failed !== undefined) parts.push(`failed=${r.failed}`)
  if (r.exec !== undefined) parts.push(`exec=${r.exec}`)
  if (r.argv !== undefined) parts.push(`argv=${JSON.stringify(r.argv)}${r.argvTruncated === true ? '…' : ''}`)
  if (r.path !== undefined) parts.push(`path=${r.path}`)
  if (r.to !== undefined) parts.push(`to=${r.to}`)
  if (r.snapshot !== undefined) parts.push(`snapshot=${r.snapshot}`)
  if (r.target !== undefined) parts.push(`tenant=${r.target}`)
  if (r.scopes !== undefined) parts.push(`scopes=${r.scopes.join(',')}`)
  if (r.newKeyId !== undefined) parts.push(`key=${r.newKeyId}`)
  if (r.quotas !== undefined) parts.push(`quotas=${JSON.stringify(r.quotas)}`)
  if (r.name !== undefined) parts.push(`name=${r.name}`)
  if (r.dropped !== undefined) parts.push(`dropped=${r.dropped}`)
  if (r.field !== undefined) parts.push(`field=${r.field}`)
  return parts.join(' ')
}

/** `warren audit [--tenant T] [--sandbox ID] [--action A] [--since 1h] [--limit N] [--json]` */
export async function audit (flags: AuditFlags, out: Out = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const query = auditQuery(flags)
  return await withClient(async (client) => {
    const page = await client.audit(query)
    if (flags.json === true) {
      for (const r of page.records) out.stdout.write(JSON.stringify(r) + '\n')
    } else {
      const rows = [['TIME', 'ACTION', 'TENANT', 'KEY', 'OUTCOME', 'MS', 'DETAILS']]
      for (const r of page.records) rows.push([new Date(r.at).toISOString(), r.action, r.tenant, r.keyId, r.outcome, String(r.ms), detailsOf(r)])
      writeTable(out.stdout, rows)
    }
    if (page.truncated) out.stderr.write(`warren: older records matched too; narrow --since or raise --limit to see them\n`)
    return 0
  })
}
