/**
 * The client-side commands of `warren`: run, ps, exec, kill, token, tenant, nodes. Each takes its
 * parsed arguments and returns the process exit code.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { connect, type Client, type CreateSpec } from '../sdk/index.js'
import { isScope } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { buildAndPush, pushTarget } from './image.js'
import { createProgress } from './progress.js'

export interface Out { stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }
const std: Out = { stdout: process.stdout, stderr: process.stderr }

async function withClient<T> (fn: (c: Client) => Promise<T>): Promise<T> {
  const client = await connect()
  try { return await fn(client) } finally { await client.close() }
}

function parseLabels (pairs: string[] | undefined): Record<string, string> | undefined {
  if (pairs === undefined || pairs.length === 0) return undefined
  const out: Record<string, string> = {}
  for (const p of pairs) {
    const eq = p.indexOf('=')
    if (eq <= 0) throw createError(ErrorCodes.INVALID_ARGUMENT, `--label takes key=value, got ${p}`)
    out[p.slice(0, eq)] = p.slice(eq + 1)
  }
  return out
}

/**
 * A base layer built from `dir` the operator's way (as `warren image build --from-dir` does:
 * built here, pushed to the configured control plane, or to the blob store directory `store`),
 * named by its digest.
 */
async function layerFromDir (dir: string, store: string | undefined): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'warren-run-'))
  try {
    const progress = createProgress(2)
    const pushed = await buildAndPush(resolve(dir), pushTarget(store), 'base', work, progress)
    progress.done()
    return pushed.digest
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/** The flags of `warren run`. */
export interface RunFlags { backend?: string, ttl?: string, label?: string[], image?: string, workspace?: string, tools?: string, 'image-dir'?: string, store?: string }

/**
 * The layers `warren run` stacks, as the SDK's `image` takes them: `--image` (or `--image-dir`)
 * the base, `--workspace` one workspace layer, `--tools a,b` tools layers in order. A workspace
 * or tools without a base go over the built-in base.
 */
async function runImage (flags: RunFlags): Promise<CreateSpec['image']> {
  if (flags.image !== undefined && flags['image-dir'] !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'give --image or --image-dir, not both', { field: 'image' })
  const tools = flags.tools?.split(',').map((t) => t.trim()).filter((t) => t !== '')
  if (flags.tools !== undefined && tools!.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, '--tools takes a comma-separated list of layers', { field: 'tools' })
  // --image-dir is the operator's: the layer is built here and pushed, and the create names its digest.
  const base = flags.image ?? (flags['image-dir'] !== undefined ? await layerFromDir(flags['image-dir'], flags.store) : undefined)
  if (base === undefined && flags.workspace === undefined && tools === undefined) return undefined
  return {
    base: base ?? 'busybox',
    ...(flags.workspace !== undefined ? { workspace: flags.workspace } : {}),
    ...(tools !== undefined ? { tools } : {})
  }
}

/** `warren run [--backend B] [--image BASE [--workspace W] [--tools T1,T2]] [--ttl MS] [--label k=v] -- CMD…`: create, stream, exit with the command's code, kill. */
export async function run (cmd: string[], flags: RunFlags, out: Out = std): Promise<number> {
  if (cmd.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren run [--backend B] [--image NAME:TAG | --image-dir DIR [--store BLOBS]] [--workspace W] [--tools T1,T2] [--ttl MS] -- CMD…')
  return await withClient(async (client) => {
    const labels = parseLabels(flags.label)
    const image = await runImage(flags)
    const sb = await client.create({
      backend: (flags.backend ?? (image !== undefined ? 'container' : 'function')) as 'function',
      ...(image !== undefined ? { image } : {}),
      ...(flags.ttl !== undefined ? { ttlMs: Number(flags.ttl) } : {}),
      ...(labels !== undefined ? { labels } : {})
    })
    try {
      const r = await sb.exec(cmd, { onStdout: (b) => out.stdout.write(b), onStderr: (b) => out.stderr.write(b) })
      if (r.truncated) out.stderr.write('warren: output truncated at the cap\n')
      if (r.reason !== undefined) out.stderr.write(`warren: command ended: ${r.reason}${r.message !== undefined ? ` (${r.message})` : ''}\n`)
      return r.exitCode
    } finally {
      await sb.kill()
    }
  })
}

/** `warren exec ID -- CMD…` */
export async function exec (id: string | undefined, cmd: string[], out: Out = std): Promise<number> {
  if (id === undefined || cmd.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren exec ID -- CMD…')
  return await withClient(async (client) => {
    const sb = await client.attach(id)
    const r = await sb.exec(cmd, { onStdout: (b) => out.stdout.write(b), onStderr: (b) => out.stderr.write(b) })
    return r.exitCode
  })
}

/** `warren log ID`: what was run in a sandbox, a command a line, then the head of its output. */
export async function log (id: string | undefined, out: Out = std): Promise<number> {
  if (id === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren log ID')
  return await withClient(async (client) => {
    const sb = await client.attach(id)
    let from = 0
    for (;;) {
      const page = await sb.trajectory({ fromSeq: from })
      if (from === 0 && page.dropped > 0) out.stdout.write(`(${page.dropped} earlier commands dropped)\n`)
      for (const e of page.entries) {
        const ended = e.endedAt === undefined ? 'running' : `exit ${e.exitCode ?? '?'}${e.reason !== undefined ? ` (${e.reason})` : ''} in ${e.endedAt - e.startedAt} ms`
        out.stdout.write(`#${e.seq} ${new Date(e.startedAt).toISOString()} ${JSON.stringify(e.argv)} ${ended}, ${e.stdoutBytes} B out, ${e.stderrBytes} B err\n`)
        for (const [name, text, total] of [['out', e.stdout, e.stdoutBytes], ['err', e.stderr, e.stderrBytes]] as const) {
          if (text === '') continue
          for (const line of text.replace(/\n$/, '').split('\n')) out.stdout.write(`  ${name}| ${line}\n`)
          if (Buffer.byteLength(text) < total) out.stdout.write(`  ${name}| … (${total - Buffer.byteLength(text)} more bytes)\n`)
        }
      }
      if (page.entries.length === 0) return 0
      from = page.nextSeq
    }
  })
}

/** `warren ps [--label k=v] [--state S] [--all]`: live sandboxes; ended ones too with --all. */
export async function ps (flags: { label?: string[], state?: string, all?: boolean }, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const labels = parseLabels(flags.label)
    const list = await client.list({
      ...(labels !== undefined ? { labels } : {}), ...(flags.state !== undefined ? { state: flags.state as 'ready' } : {}), ...(flags.all === true ? { all: true } : {})
    })
    const rows = [['ID', 'STATE', 'BACKEND', 'NODE', 'AGE', 'LABELS']]
    for (const s of list) {
      rows.push([s.id, s.state + (s.reason !== undefined ? `(${s.reason})` : ''), s.backend, s.nodeId, `${Math.round((Date.now() - s.createdAt) / 1000)}s`,
        Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(',')])
    }
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
    for (const r of rows) out.stdout.write(r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd() + '\n')
    return 0
  })
}

/** `warren kill ID…` */
export async function kill (ids: string[], out: Out = std): Promise<number> {
  if (ids.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren kill ID…')
  return await withClient(async (client) => {
    // One request for all of them; each id's outcome is its own line.
    let failed = 0
    for (const o of await client.kill(ids)) {
      if (o.ok) { out.stdout.write(`${o.id}\n`); continue }
      failed++
      out.stderr.write(`warren: ${o.id}: ${o.error.code}: ${o.error.message}\n`)
    }
    return failed === 0 ? 0 : 1
  })
}

/** `warren token create --tenant T --scopes a,b` */
export async function tokenCreate (flags: { tenant?: string, scopes?: string }, out: Out = std): Promise<number> {
  if (flags.tenant === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren token create --tenant T [--scopes sandbox:create,sandbox:exec,sandbox:read]', { field: 'tenant' })
  const scopes = (flags.scopes ?? 'sandbox:create,sandbox:exec,sandbox:read').split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const s of scopes) if (!isScope(s)) throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown scope ${s}`, { field: 'scopes' })
  return await withClient(async (client) => {
    out.stdout.write(`${await client.createToken(flags.tenant!, scopes)}\n`)
    return 0
  })
}

/** `warren nodes` */
export async function nodes (out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    out.stdout.write(JSON.stringify(await client.nodes(), null, 2) + '\n')
    return 0
  })
}

/** `warren tenant ls`: every tenant and its quotas (admin). */
export async function tenantList (out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    for (const t of await client.tenants()) {
      out.stdout.write(`${t.tenant}\tmaxSandboxes=${t.quotas.maxSandboxes} createsPerSecond=${t.quotas.createsPerSecond} createBurst=${t.quotas.createBurst}\n`)
    }
    return 0
  })
}

/** `warren tenant quotas --tenant T [--max-sandboxes N] [--creates-per-second R] [--create-burst B]`: reads or sets (admin). */
export async function tenantQuotas (flags: { tenant?: string, 'max-sandboxes'?: string, 'creates-per-second'?: string, 'create-burst'?: string }, out: Out = std): Promise<number> {
  if (flags.tenant === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren tenant quotas --tenant T [--max-sandboxes N] [--creates-per-second R] [--create-burst B]', { field: 'tenant' })
  // The numbers go as given; the control plane checks them (and names the quota it refuses).
  const given = { maxSandboxes: flags['max-sandboxes'], createsPerSecond: flags['creates-per-second'], createBurst: flags['create-burst'] }
  const change = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined).map(([k, v]) => [k, Number(v)]))
  return await withClient(async (client) => {
    const q = await client.quotas(flags.tenant!, Object.keys(change).length > 0 ? change : undefined)
    out.stdout.write(`${flags.tenant}\tmaxSandboxes=${q.maxSandboxes} createsPerSecond=${q.createsPerSecond} createBurst=${q.createBurst}\n`)
    return 0
  })
}
