/**
 * One sandbox's trajectory: its header, then each step — commands with their output, file
 * changes, snapshots — read a page at a time and followed while the sandbox runs.
 */
import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { WarrenError, type Connection } from './client.js'
import { bytes, commandLine, duration, pathName, shortDigest, text } from './format.js'
import type { RecordedBytes, Step, TrajectoryHeader, TrajectoryPage } from './types.js'

export const TrajectoryDefaults = {
  /** Steps the page keeps of one trajectory (the first ones; the CLI's `warren log` has them all). */
  maxSteps: 2000,
  /** Pages one refresh reads at most. */
  pagesPerRefresh: 10,
  everyMs: 1000,
  /** Bytes of an output kept in the blob store that the page reads and shows. */
  blobHeadBytes: 64 * 1024
}

interface Shown { header?: TrajectoryHeader, steps: Step[], complete: boolean, error?: string, cut: boolean }

function useTrajectory (conn: Connection, id: string, tenant: string): Shown {
  const [shown, setShown] = useState<Shown>({ steps: [], complete: false, cut: false })
  useEffect(() => {
    let live = true
    let timer = 0
    let header: TrajectoryHeader | undefined
    const steps = new Map<number, Step>()
    let from = 0
    let cut = false
    const tick = async (): Promise<void> => {
      let complete = false
      try {
        for (let i = 0; i < TrajectoryDefaults.pagesPerRefresh; i++) {
          const p = await conn.request<TrajectoryPage>({ type: 'trajectory', id, fromSeq: from, limit: 200, ...(tenant !== '' ? { tenant } : {}) })
          if (!live) return
          if (p.header !== undefined) header = p.header
          for (const s of p.steps) {
            if (steps.has(s.seq) || steps.size < TrajectoryDefaults.maxSteps) steps.set(s.seq, s)
            else cut = true
          }
          complete = p.complete
          from = p.nextSeq
          if (p.steps.length === 0 || cut) break
        }
        // A command still running is read again until its step carries its end.
        const running = [...steps.values()].filter((s) => s.kind === 'exec' && s.endedAt === undefined).map((s) => s.seq)
        if (running.length > 0) from = Math.min(from, ...running)
        setShown({ ...(header !== undefined ? { header } : {}), steps: [...steps.values()].sort((a, b) => a.seq - b.seq), complete, cut })
      } catch (err) {
        if (!live) return
        setShown((s) => ({ ...s, error: err instanceof WarrenError ? `${err.code}: ${err.message}` : String(err) }))
      }
      // Followed until the sandbox has ended and every step it recorded has its end.
      if (live && !(complete && ![...steps.values()].some((s) => s.kind === 'exec' && s.endedAt === undefined))) {
        timer = window.setTimeout(() => { void tick() }, TrajectoryDefaults.everyMs)
      }
    }
    setShown({ steps: [], complete: false, cut: false })
    void tick()
    return () => { live = false; window.clearTimeout(timer) }
  }, [id, tenant])
  return shown
}

/** Output kept in the blob store: its first `blobHeadBytes` read once with `trajectory-blob`. */
function useBlobHead (conn: Connection, id: string, tenant: string, b: RecordedBytes | undefined): string | undefined {
  const [head, setHead] = useState<string | undefined>(undefined)
  const digest = b?.data === undefined && b?.head === undefined ? b?.blob : undefined
  useEffect(() => {
    if (digest === undefined) return
    let live = true
    conn.request<Uint8Array>({ type: 'trajectory-blob', id, digest, offset: 0, length: TrajectoryDefaults.blobHeadBytes, ...(tenant !== '' ? { tenant } : {}) }).then(
      (data) => { if (live) setHead(data.length < (b?.bytes ?? 0) ? `${text(data)}\n… (${bytes((b?.bytes ?? 0) - data.length)} more: warren log ${id} --json has them)` : text(data)) },
      (err: unknown) => { if (live) setHead(`(${bytes(b?.bytes ?? 0)} in the blob store; reading them failed: ${err instanceof Error ? err.message : String(err)})`) })
    return () => { live = false }
  }, [digest])
  return head
}

function Output (props: { conn: Connection, id: string, tenant: string, name: string, b: RecordedBytes | undefined }) {
  const b = props.b
  const blobHead = useBlobHead(props.conn, props.id, props.tenant, b)
  if (b === undefined || b.bytes === 0) return null
  let body: string
  if (b.data !== undefined) body = text(b.data)
  else if (b.head !== undefined) body = `${text(b.head)}\n… (${bytes(b.bytes - b.head.length - (b.tail?.length ?? 0))} not kept) …\n${text(b.tail)}`
  else body = blobHead ?? `(${bytes(b.bytes)} in the blob store as ${shortDigest(b.blob ?? '')}: reading…)`
  return html`<pre class=${`out ${props.name}`} data-stream=${props.name}>${body}</pre>`
}

function ExecStep (props: { conn: Connection, id: string, tenant: string, s: Step }) {
  const s = props.s
  const ended = s.endedAt !== undefined
  const ok = s.exitCode === 0
  return html`
    <div class="step-head">
      <code class="cmd">$ ${commandLine(s.argv ?? [])}</code>
      <span class=${`badge ${!ended ? 'state-creating' : ok ? 'state-ready' : 'state-failed'}`}>${!ended ? 'running' : s.exitCode !== undefined ? `exit ${s.exitCode}` : s.reason ?? 'ended'}</span>
      ${s.durationMs !== undefined ? html`<span class="muted small">${duration(s.durationMs)}</span>` : null}
      ${s.cwd !== undefined ? html`<span class="muted small">in ${s.cwd}</span>` : null}
    </div>
    <${Output} conn=${props.conn} id=${props.id} tenant=${props.tenant} name="stdout" b=${s.stdout} />
    <${Output} conn=${props.conn} id=${props.id} tenant=${props.tenant} name="stderr" b=${s.stderr} />`
}

function describe (s: Step): string {
  switch (s.kind) {
    case 'write': return `wrote ${pathName(s.path)} (${bytes(s.content?.bytes ?? 0)})`
    case 'upload': return `unpacked a tar at ${pathName(s.path)} (${bytes(s.content?.bytes ?? 0)})`
    case 'remove': return `removed ${pathName(s.path)}`
    case 'rename': return `renamed ${pathName(s.from)} to ${pathName(s.to)}`
    case 'mkdir': return `made directory ${pathName(s.path)}`
    case 'symlink': return `linked ${pathName(s.path)} → ${pathName(s.target)}`
    case 'snapshot': return `snapshot ${s.snapshot ?? ''}`
    case 'egress': return `egress ${s.host ?? ''}:${s.port ?? ''} ${s.allowed === true ? 'allowed' : 'refused'}`
    default: return s.kind
  }
}

/** @param tenant the sandbox's tenant when an admin reads another's ('' for the key's own) */
export function Trajectory (props: { conn: Connection, id: string, tenant: string, onClose: () => void }) {
  const t = useTrajectory(props.conn, props.id, props.tenant)
  const h = t.header
  return html`
    <section class="card trajectory" id="trajectory" data-sandbox-id=${props.id}>
      <div class="card-head">
        <h2>Trajectory of <code>${props.id}</code></h2>
        <span class="muted small">${t.complete ? 'complete' : 'live'} · ${t.steps.length} ${t.steps.length === 1 ? 'step' : 'steps'}</span>
        <button class="ghost" id="trajectory-close" onClick=${props.onClose}>close</button>
      </div>
      ${t.error !== undefined ? html`<p class="error">${t.error}</p>` : null}
      ${h !== undefined ? html`<p class="muted small">on ${h.node} · ${String(h.spec.backend ?? '')} · layers ${h.layers.length === 0 ? 'none' : h.layers.map(shortDigest).join(' / ')}${h.snapshot !== undefined ? ` · from ${h.snapshot}` : ''}</p>` : null}
      ${t.steps.length === 0 && t.error === undefined ? html`<p class="muted">No step recorded yet.</p>` : null}
      <ol class="steps">
        ${t.steps.map((s) => html`
          <li key=${s.seq} class=${`step step-${s.kind}`} data-seq=${s.seq}>
            <span class="seq">#${s.seq}</span>
            <div class="step-body">${s.kind === 'exec' ? html`<${ExecStep} conn=${props.conn} id=${props.id} tenant=${props.tenant} s=${s} />` : html`<div class="step-head">${describe(s)}</div>`}</div>
          </li>`)}
      </ol>
      ${t.cut ? html`<p class="muted small">Only the first ${TrajectoryDefaults.maxSteps} steps are shown: <code>warren log ${props.id}</code> has them all.</p>` : null}
    </section>`
}
