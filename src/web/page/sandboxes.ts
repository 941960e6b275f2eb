/** The tenant's sandboxes, filtered by labels and state on the server (`list`), live. */
import { html } from 'htm/preact'
import { useState } from 'preact/hooks'
import type { Connection } from './client.js'
import { usePoll } from './hooks.js'
import { ago, until } from './format.js'
import type { SandboxView } from './types.js'

export const SandboxesDefaults = {
  /** Rows one list asks for: the page shows no more than this. */
  limit: 500,
  everyMs: 1000
}

const STATES = ['creating', 'ready', 'paused', 'stopping', 'hibernated', 'gone', 'failed', 'lost']

/** "a=1, b=2" as a label map; undefined with the reason when it is not one. */
export function parseLabels (s: string): { labels?: Record<string, string>, error?: string } {
  const labels: Record<string, string> = {}
  for (const part of s.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = part.indexOf('=')
    if (eq <= 0) return { error: `"${part}" is not key=value` }
    labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim()
  }
  return Object.keys(labels).length > 0 ? { labels } : {}
}

/**
 * @param tenants an admin's: the tenants it may pick (undefined for a tenant's key, which sees its own)
 * @param tenant the tenant picked ('' for the key's own)
 */
export function Sandboxes (props: { conn: Connection, kick: number, selected: string | undefined, onSelect: (id: string) => void, tenants: string[] | undefined, tenant: string, onTenant: (t: string) => void }) {
  const [labelText, setLabelText] = useState('')
  const [state, setState] = useState('live')
  const parsed = parseLabels(labelText)
  const filterKey = JSON.stringify([parsed.labels ?? {}, state, props.tenant])
  const list = usePoll(async () => {
    if (parsed.error !== undefined) return undefined
    return await props.conn.request<SandboxView[]>({
      type: 'list', limit: SandboxesDefaults.limit,
      ...(props.tenant !== '' ? { tenant: props.tenant } : {}),
      ...(parsed.labels !== undefined ? { labels: parsed.labels } : {}),
      ...(state === 'all' ? { all: true } : state !== 'live' ? { state } : {})
    })
  }, SandboxesDefaults.everyMs, [filterKey], props.kick)
  const rows = list.value ?? []
  const now = Date.now()
  return html`
    <div class="filters">
      ${props.tenants !== undefined ? html`<label>tenant <select id="filter-tenant" value=${props.tenant} onChange=${(e: Event) => props.onTenant((e.target as HTMLSelectElement).value)}>
        <option value="">this key's</option>
        ${props.tenants.map((t) => html`<option value=${t}>${t}</option>`)}
      </select></label>` : null}
      <label>labels <input id="filter-labels" placeholder="run=r1, team=a" value=${labelText} onInput=${(e: Event) => setLabelText((e.target as HTMLInputElement).value)} /></label>
      <label>state <select id="filter-state" value=${state} onChange=${(e: Event) => setState((e.target as HTMLSelectElement).value)}>
        <option value="live">live</option><option value="all">all (ended too)</option>
        ${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
      <span class="muted small">${list.value === undefined ? '' : `${rows.length}${rows.length >= SandboxesDefaults.limit ? '+' : ''} shown`}</span>
    </div>
    ${parsed.error !== undefined ? html`<p class="error small">${parsed.error}</p>` : null}
    ${list.error !== undefined ? html`<p class="error small">${list.error.message}</p>` : null}
    <table class="table clickable" id="sandboxes">
      <thead><tr><th>sandbox</th><th>state</th><th>backend</th><th>node</th><th>labels</th><th>created</th><th>ends</th></tr></thead>
      <tbody>
        ${rows.map((s) => html`
          <tr key=${s.id} data-sandbox-id=${s.id} class=${s.id === props.selected ? 'selected' : ''} onClick=${() => props.onSelect(s.id)}>
            <td><code>${s.id}</code></td>
            <td><span class=${`badge state-${s.state}`}>${s.state}</span>${s.reason !== undefined ? html` <span class="muted small">${s.reason}</span>` : null}</td>
            <td>${s.backend}</td>
            <td>${s.nodeId}</td>
            <td>${Object.entries(s.labels).map(([k, v]) => html`<span class="chip">${k}=${v}</span>`)}</td>
            <td class="muted small">${ago(s.createdAt, now)}</td>
            <td class="muted small">${until(s.expiresAt, now)}</td>
          </tr>`)}
      </tbody>
    </table>
    ${list.value !== undefined && rows.length === 0 ? html`<p class="muted" id="no-sandboxes">No sandbox matches.</p>` : null}`
}
