/**
 * The client-side commands of `warren`: ps, log, kill, pause, resume, nodes (create, run and
 * exec are in run.ts; token, quota and tenant in admin.ts). Each takes its parsed arguments and returns the process exit code.
 */
import { RECORD_STATES, type RecordState } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { withClient } from './client.js'
import { writeTable } from './columns.js'
import { parseLabels } from './sandbox-flags.js'
import { headerLine, jsonLine, stepLines } from './trajectory-log.js'

export interface Out { stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }
const std: Out = { stdout: process.stdout, stderr: process.stderr }

/**
 * `warren log ID [--json]`: what happened in a sandbox (its trajectory), also after it ended:
 * a step a line with the head of its output; with --json, JSON lines (the header, then a step each).
 */
export async function log (id: string | undefined, flags: { json?: boolean } = {}, out: Out = std): Promise<number> {
  if (id === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren log ID [--json]')
  return await withClient(async (client) => {
    let complete = false
    let steps = 0
    for (let from = 0; ;) {
      const page = await client.trajectory(id, { fromSeq: from })
      if (page.header !== undefined) out.stdout.write(flags.json === true ? jsonLine(page.header) + '\n' : headerLine(page.header))
      for (const s of page.steps) out.stdout.write(flags.json === true ? jsonLine(s) + '\n' : stepLines(s))
      steps += page.steps.length
      complete = page.complete
      if (page.steps.length === 0) break
      from = page.nextSeq
    }
    if (flags.json !== true && !complete) out.stdout.write(`(${steps} steps so far: the sandbox runs, or its last steps are on their way)\n`)
    return 0
  })
}

/** `warren ps [--label k=v] [--state S] [--all]`: live sandboxes; ended ones too with --all. */
export async function ps (flags: { label?: string[], state?: string, all?: boolean }, out: Out = std): Promise<number> {
  const labels = parseLabels(flags.label)
  const state = flags.state
  if (state !== undefined && !(RECORD_STATES as readonly string[]).includes(state)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--state must be one of ${RECORD_STATES.join(', ')}, not ${JSON.stringify(state)}`, { field: 'state' })
  }
  return await withClient(async (client) => {
    const list = await client.list({
      ...(labels !== undefined ? { labels } : {}), ...(state !== undefined ? { state: state as RecordState } : {}), ...(flags.all === true ? { all: true } : {})
    })
    const rows = [['ID', 'STATE', 'BACKEND', 'NODE', 'AGE', 'LABELS']]
    for (const s of list) {
      rows.push([s.id, s.state + (s.reason !== undefined ? `(${s.reason})` : ''), s.backend, s.nodeId, `${Math.round((Date.now() - s.createdAt) / 1000)}s`,
        Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(',')])
    }
    writeTable(out.stdout, rows)
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

/** `warren pause ID` and `warren resume ID`: prints the id and the state it is now in. */
export async function freeze (type: 'pause' | 'resume', id: string | undefined, out: Out = std): Promise<number> {
  if (id === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `usage: warren ${type} ID`)
  return await withClient(async (client) => {
    const sb = await client.attach(id)
    const view = type === 'pause' ? await sb.pause() : await sb.resume()
    out.stdout.write(`${view.id}\t${view.state}\n`)
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
