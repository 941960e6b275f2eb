/**
 * How `warren log` prints a trajectory: readably, a step a line with the head of what it
 * recorded below it; or (`--json`) as JSON lines — the header, then one step per line, every
 * byte field (`data`, `head`, `tail`) a base64 string (docs/protocol.md, "Trajectories as JSON").
 */
import type { RecordedBytes, Step, TrajectoryHeader } from '../cluster/index.js'
import { shownName } from '../file-names.js'

export const LogDefaults = {
  /** Lines of a recorded stream printed under its step (the rest is counted). */
  maxLines: 20,
  /** Bytes of a recorded stream printed at most. */
  maxBytes: 4096
}

/** A value as one JSON line: byte arrays become base64 strings. */
export function jsonLine (value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.length).toString('base64')
    // Buffer's own toJSON runs before the replacer sees it: turn that shape back into base64 too.
    if (v !== null && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data)) {
      return Buffer.from((v as { data: number[] }).data).toString('base64')
    }
    return v
  })
}

/** The header as one line: the sandbox, its backend and layers, its tenant, node and birth. */
export function headerLine (h: TrajectoryHeader): string {
  const layers = h.layers.length > 0 ? ` on ${h.layers.join(' < ')}` : ''
  return `sandbox ${h.sandboxId} (${h.spec.backend}${layers}) of ${h.tenant} on ${h.node}, created ${new Date(h.createdAt).toISOString()}` +
    (h.snapshot !== undefined ? ` from snapshot ${h.snapshot}` : '') + '\n'
}

function size (r: RecordedBytes | undefined): string {
  if (r === undefined) return '0 B'
  const kept = r.data !== undefined ? '' : r.blob !== undefined ? ' in the blob store' : ' (head and tail kept)'
  return `${r.bytes} B${kept}`
}

/** What one step says, as lines (its first line, then the heads of what it recorded). */
export function stepLines (s: Step): string {
  const when = new Date(s.at).toISOString()
  let line: string
  let streams: Array<[string, RecordedBytes | undefined]> = []
  switch (s.kind) {
    case 'exec': {
      const how = [s.cwd !== undefined ? `cwd=${s.cwd}` : '', s.user !== undefined ? `user=${s.user}` : '', s.pty !== undefined ? `pty=${s.pty.cols}x${s.pty.rows}` : '',
        s.env !== undefined ? `env=${Object.keys(s.env).join(',')}` : ''].filter((x) => x !== '').join(' ')
      const ended = s.endedAt === undefined ? 'running' : `exit ${s.exitCode ?? '?'}${s.reason !== undefined ? ` (${s.reason})` : ''} in ${Math.round(s.durationMs ?? s.endedAt - s.at)} ms`
      line = `exec ${JSON.stringify(s.argv)}${how !== '' ? ' ' + how : ''} ${ended}` +
        (s.endedAt !== undefined ? `, ${size(s.stdout)} out, ${size(s.stderr)} err` : '') + (s.stdin !== undefined ? `, ${size(s.stdin)} in` : '')
      streams = [['in', s.stdin], ['out', s.stdout], ['err', s.stderr]]
      break
    }
    case 'write': line = `write ${shownName(s.path)}${s.mode !== undefined ? ` mode ${s.mode.toString(8)}` : ''}: ${size(s.content)}, sha256 ${s.content.sha256.slice(0, 16)}…`; break
    case 'upload': line = `upload (tar) to ${shownName(s.path)}: ${size(s.content)}, sha256 ${s.content.sha256.slice(0, 16)}…`; break
    case 'remove': line = `remove ${shownName(s.path)}${s.recursive === true ? ' (recursive)' : ''}`; break
    case 'rename': line = `rename ${shownName(s.from)} -> ${shownName(s.to)}`; break
    case 'mkdir': line = `mkdir ${shownName(s.path)}${s.parents === true ? ' (parents)' : ''}`; break
    case 'symlink': line = `symlink ${shownName(s.path)} -> ${shownName(s.target)}`; break
    case 'snapshot': line = `snapshot ${s.snapshot} (layer ${s.layer})`; break
    case 'pause': line = 'pause'; break
    case 'resume': line = 'resume'; break
    case 'egress': line = `egress ${s.host}:${s.port} ${s.allowed ? 'allowed' : 'refused'}`; break
  }
  let out = `#${s.seq} ${when} ${line}\n`
  for (const [name, r] of streams) out += head(name, r)
  return out
}

/** The first lines of recorded bytes kept inline (or their head), as text. */
function head (name: string, r: RecordedBytes | undefined): string {
  const bytes = r?.data ?? r?.head
  if (r === undefined || bytes === undefined || bytes.length === 0) return ''
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, LogDefaults.maxBytes)).toString('utf8')
  const lines = text.replace(/\n$/, '').split('\n')
  let out = lines.slice(0, LogDefaults.maxLines).map((l) => `  ${name}| ${l}\n`).join('')
  const shown = Buffer.byteLength(lines.slice(0, LogDefaults.maxLines).join('\n'))
  if (shown < r.bytes - 1) out += `  ${name}| … (${r.bytes - shown} more bytes)\n`
  return out
}
