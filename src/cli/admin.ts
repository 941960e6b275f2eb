/**
 * The administration commands (an admin key's): `warren token create|ls|revoke|rotate-admin`
 * and `warren quota set|get|ls` (`warren tenant ls|quotas`, the older names, run the same code).
 */
import { readFileSync } from 'node:fs'
import { isScope, keyIdOf, type KeyView, type Quotas } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { configPath, resolveConfig, writeConfig } from '../sdk/index.js'
import { withClient } from './client.js'
import { writeTable } from './columns.js'
import type { Out } from './commands.js'
import { parseDuration, parseMebibytes, parseNumber } from './units.js'

const MiB = 1024 * 1024

const std: Out = { stdout: process.stdout, stderr: process.stderr }

export const AdminCliDefaults = {
  scopes: 'sandbox:create,sandbox:exec,sandbox:read',
  /** Longest `--expires` (10 years) and the shortest (1 s), as the control plane bounds them. */
  maxExpiresMs: 3650 * 86_400_000,
  minExpiresMs: 1000
}

/**
 * `--expires 30d` (units s, m, h, d) as ms.
 * @throws INVALID_ARGUMENT naming `expires` when malformed or outside 1 s to 10 years
 */
export function parseExpires (text: string): number {
  if (!/^\d+(?:\.\d+)?[smhd]$/.test(text.trim())) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--expires looks like 30d, 12h, 90m or 3600s, not ${JSON.stringify(text)}`, { field: 'expires' })
  }
  const ms = Math.round(parseDuration(text, 'expires'))
  if (ms < AdminCliDefaults.minExpiresMs || ms > AdminCliDefaults.maxExpiresMs) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--expires must be from 1s to 3650d (10 years), not ${text}`, { field: 'expires' })
  }
  return ms
}

/** `warren token create --tenant T [--scopes a,b] [--expires 30d]`: prints the key (shown once). */
export async function tokenCreate (flags: { tenant?: string, scopes?: string, expires?: string }, out: Out = std): Promise<number> {
  if (flags.tenant === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `usage: warren token create --tenant T [--scopes ${AdminCliDefaults.scopes}] [--expires 30d]`, { field: 'tenant' })
  const scopes = (flags.scopes ?? AdminCliDefaults.scopes).split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const s of scopes) if (!isScope(s)) throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown scope ${s}`, { field: 'scopes' })
  const expiresInMs = flags.expires !== undefined ? parseExpires(flags.expires) : undefined
  return await withClient(async (client) => {
    out.stdout.write(`${await client.createToken(flags.tenant!, scopes, expiresInMs !== undefined ? { expiresInMs } : {})}\n`)
    return 0
  })
}

const when = (ms: number | undefined, none: string): string => ms === undefined ? none : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

/** `warren token ls [--tenant T] [--json]`: ids, tenants, scopes and times; never a secret. */
export async function tokenList (flags: { tenant?: string, json?: boolean }, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const keys: KeyView[] = await client.tokens(flags.tenant !== undefined ? { tenant: flags.tenant } : {})
    if (flags.json === true) {
      for (const k of keys) out.stdout.write(JSON.stringify(k) + '\n')
      return 0
    }
    const now = Date.now()
    const rows = [['ID', 'TENANT', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED']]
    for (const k of keys) {
      const expires = when(k.expiresAt, 'never') + (k.expiresAt !== undefined && k.expiresAt <= now ? ' (expired)' : '')
      rows.push([k.id + (k.admin === true ? ' (admin)' : ''), k.tenant, k.scopes.join(','), when(k.createdAt, '-'), expires, when(k.lastUsedAt, '-')])
    }
    writeTable(out.stdout, rows)
    return 0
  })
}

/** `warren token revoke KEY_ID`: the key stops working and its open sessions are closed. */
export async function tokenRevoke (id: string, out: Out = std): Promise<number> {
  // A whole key pasted by mistake is turned into its id: the secret never needs to travel.
  const keyId = keyIdOf(id) ?? id
  return await withClient(async (client) => {
    const r = await client.revokeToken(keyId)
    out.stdout.write(`${r.id}\trevoked\n`)
    return 0
  })
}

/**
 * `warren token rotate-admin`: a new admin key, printed; the old one stops working. When the
 * config file held the old one, it gets the new one.
 */
export async function tokenRotateAdmin (out: Out = std): Promise<number> {
  const config = resolveConfig()
  return await withClient(async (client) => {
    const token = await client.rotateAdminKey()
    let note = ''
    try {
      const file = JSON.parse(readFileSync(configPath(), 'utf8')) as { url?: string, token?: string }
      if (file.token === config.token) { writeConfig({ url: file.url ?? config.url, token }); note = `   (written to ${configPath()})` }
    } catch { /* no config file: the key is printed only */ }
    out.stdout.write(`${token}${note}\n`)
    return 0
  })
}

function quotaLine (tenant: string, q: Quotas): string {
  return `${tenant}\t${Object.values(QUOTA_FLAGS).map((name) => `${name}=${q[name]}`).join(' ')}\n`
}

const QUOTA_FLAGS = {
  'max-sandboxes': 'maxSandboxes',
  'creates-per-second': 'createsPerSecond',
  'create-burst': 'createBurst',
  'requests-per-second': 'requestsPerSecond',
  'request-burst': 'requestBurst',
  'trajectory-storage': 'trajectoryBytes'
} as const
type QuotaFlags = { [flag in keyof typeof QUOTA_FLAGS]?: string }
const QUOTA_USAGE = 'warren quota set TENANT [--max-sandboxes N] [--creates-per-second R] [--create-burst B] [--requests-per-second R] [--request-burst B] [--trajectory-storage SIZE]'

/**
 * The quotas the flags give, as numbers (the control plane checks their bounds, naming `quotas.<name>`).
 * @throws INVALID_ARGUMENT naming the flag for a value that is not a number
 */
function quotaChange (flags: QuotaFlags): Partial<Quotas> {
  const change: Partial<Quotas> = {}
  for (const [flag, name] of Object.entries(QUOTA_FLAGS) as Array<[keyof QuotaFlags, keyof Quotas]>) {
    const v = flags[flag]
    if (v === undefined) continue
    // A size takes its unit (64GiB; a plain number is MiB, as every size flag); the rest are plain numbers.
    change[name] = name === 'trajectoryBytes' ? parseMebibytes(v, flag) * MiB : parseNumber(v, `--${flag}`, { min: 0 })
  }
  return change
}

/** `warren quota set TENANT [--max-sandboxes N] [--creates-per-second R] …`: creation quotas apply from the tenant's next create, request rates at once. */
export async function quotaSet (tenant: string | undefined, flags: QuotaFlags, out: Out = std): Promise<number> {
  const change = quotaChange(flags)
  if (tenant === undefined || Object.keys(change).length === 0) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `usage: ${QUOTA_USAGE} (at least one)`, { field: tenant === undefined ? 'tenant' : 'max-sandboxes' })
  }
  return await withClient(async (client) => {
    out.stdout.write(quotaLine(tenant, await client.setQuotas(tenant, change)))
    return 0
  })
}

/** `warren quota get TENANT` (and, with flags, the older `warren tenant quotas --tenant T …`, which sets). */
export async function quotaGet (tenant: string | undefined, flags: QuotaFlags = {}, out: Out = std): Promise<number> {
  if (tenant === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren quota get TENANT', { field: 'tenant' })
  if (Object.keys(quotaChange(flags)).length > 0) return await quotaSet(tenant, flags, out)
  return await withClient(async (client) => {
    out.stdout.write(quotaLine(tenant, await client.quotas(tenant)))
    return 0
  })
}

/** `warren quota ls` (also `warren tenant ls`): every tenant and its quotas. */
export async function quotaList (out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    for (const t of await client.tenants()) out.stdout.write(quotaLine(t.tenant, t.quotas))
    return 0
  })
}
