/**
 * `warren replay` and `warren restore`: a trajectory applied again in a fresh sandbox (or in the
 * lost sandbox made again under its id), printed as what a person checking it needs — the
 * sandbox's id, the steps applied, and the first divergence with what was expected and what came.
 */
import type { StepOutcome, StreamOutcome } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { withClient } from './client.js'
import type { Out } from './commands.js'
import { parseNumber } from './units.js'

const std: Out = { stdout: process.stdout, stderr: process.stderr }

/** What the exit code of a replay or restore that diverged is (1 is an error; 0 all matched). */
export const DIVERGED_EXIT = 2

/** Lines of a head printed under a divergence. */
const HEAD_LINES = 5

function stream (name: string, s: StreamOutcome | undefined): string {
  return s === undefined ? `${name} -` : `${name} ${s.bytes} B sha256 ${s.sha256.slice(0, 16)}…`
}

function outcomeLine (o: StepOutcome | undefined): string {
  if (o === undefined) return '-'
  const end = o.exitCode !== undefined ? `exit ${o.exitCode}` : 'no exit'
  return [end + (o.reason !== undefined ? ` (${o.reason})` : ''), stream('stdout', o.stdout), stream('stderr', o.stderr)].join(', ')
}

function headLines (label: string, s: StreamOutcome | undefined): string {
  if (s === undefined || s.head.length === 0) return ''
  const lines = Buffer.from(s.head).toString('utf8').split('\n')
  if (lines.at(-1) === '') lines.pop()
  const shown = lines.slice(0, HEAD_LINES).map((l) => `  ${label} | ${l}\n`).join('')
  return shown + (lines.length > HEAD_LINES || s.bytes > s.head.length ? `  ${label} | …\n` : '')
}

/** The divergence, as lines: where, why, what was expected and what came (their heads where they differ). */
function divergence (r: { divergedAt: number | null, reason?: string, message?: string, expected?: StepOutcome, actual?: StepOutcome }): string {
  if (r.divergedAt === null) return 'no divergence\n'
  let out = `diverged at seq ${r.divergedAt} (${r.reason ?? '?'})${r.message !== undefined ? `: ${r.message}` : ''}\n`
  if (r.expected === undefined && r.actual === undefined) return out
  out += `  expected: ${outcomeLine(r.expected)}\n  actual:   ${outcomeLine(r.actual)}\n`
  for (const name of ['stdout', 'stderr'] as const) {
    if (r.expected?.[name]?.sha256 === r.actual?.[name]?.sha256) continue
    out += headLines(`expected ${name}`, r.expected?.[name]) + headLines(`actual ${name}`, r.actual?.[name])
  }
  return out
}

const skippedLine = (skipped: number[]): string => skipped.length === 0 ? '' : `skipped ${skipped.join(',')} (not kept whole, or never ended)\n`

/** `warren replay ID [--up-to N] [--compare exit|output]` */
export async function replay (id: string, flags: { 'up-to'?: string, compare?: string }, out: Out = std): Promise<number> {
  const upTo = flags['up-to'] === undefined ? undefined : parseNumber(flags['up-to'], '--up-to', { whole: true }, 'upTo')
  const compare = flags.compare
  if (compare !== undefined && compare !== 'exit' && compare !== 'output') {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--compare must be exit or output, not ${JSON.stringify(compare)}`, { field: 'compare' })
  }
  return await withClient(async (client) => {
    const r = await client.replay(id, { ...(upTo !== undefined ? { upTo } : {}), ...(compare !== undefined ? { compare } : {}) })
    out.stdout.write(`sandbox ${r.sandbox.id}\nreplayed ${r.steps} steps\n${skippedLine(r.skipped)}${divergence(r)}`)
    return r.divergedAt === null ? 0 : DIVERGED_EXIT
  })
}

/** `warren restore ID` */
export async function restore (id: string, out: Out = std): Promise<number> {
  return await withClient(async (client) => {
    const r = await client.restore(id)
    out.stdout.write(`sandbox ${r.sandbox.id} ${r.sandbox.state}, from ${r.snapshot !== null ? `snapshot ${r.snapshot}` : 'its recorded spec'}\n` +
      `replayed ${r.replayed} steps\n${skippedLine(r.skipped)}${divergence(r)}`)
    return r.matched ? 0 : DIVERGED_EXIT
  })
}
