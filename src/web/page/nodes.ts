/** Nodes with their capacity and what their sandboxes hold, and the layer caches across them. */
import { html } from 'htm/preact'
import type { ClusterStats, NodeFigures } from './types.js'
import { shortDigest } from './format.js'

function Bar (props: { used: number, of: number, label: string }) {
  const pct = props.of > 0 ? Math.min(100, (props.used / props.of) * 100) : 0
  const tone = pct > 90 ? 'hot' : pct > 70 ? 'warm' : 'ok'
  return html`
    <div class="bar-wrap" title=${props.label}>
      <div class="bar"><div class=${`bar-fill ${tone}`} style=${{ width: `${pct.toFixed(1)}%` }}></div></div>
      <span class="bar-label">${props.label}</span>
    </div>`
}

/** MiB shown as MiB or GiB. */
function mib (n: number): string {
  return n < 10 * 1024 ? `${Math.round(n)} MiB` : `${(n / 1024).toFixed(1)} GiB`
}

function sum (m: Record<string, number>): number {
  return Object.values(m).reduce((a, b) => a + b, 0)
}

function NodeRow (props: { n: NodeFigures }) {
  const { n } = props
  const cpuCap = n.capacity.cpus * n.capacity.cpuOvercommit
  const memCap = n.capacity.memoryMiB * n.capacity.memoryOvercommit
  const running = sum(n.usage.sandboxes)
  const maxRunning = sum(n.capacity.maxSandboxes)
  return html`
    <tr data-node-id=${n.id}>
      <td><span class=${`dot ${n.alive ? 'alive' : 'dead'}`}></span><b>${n.id}</b><div class="muted small">shard ${n.shard} · seen ${(n.lastSeenMs / 1000).toFixed(1)} s ago</div></td>
      <td><${Bar} used=${n.usage.cpus} of=${cpuCap} label=${`${n.usage.cpus.toFixed(2)} / ${cpuCap} CPU`} /></td>
      <td><${Bar} used=${n.usage.memoryMiB} of=${memCap} label=${`${mib(n.usage.memoryMiB)} / ${mib(memCap)}`} /></td>
      <td><${Bar} used=${running} of=${maxRunning} label=${`${running} / ${maxRunning}`} />
        <div class="muted small">${Object.entries(n.usage.sandboxes).map(([b, c]) => `${b} ${c}`).join(' · ') || 'none running'}</div></td>
      <td class="muted small">${n.capacity.backends.join(', ')}</td>
      <td class="num">${n.layersCached}</td>
    </tr>`
}

export function Nodes (props: { stats: ClusterStats | undefined }) {
  const s = props.stats
  if (s === undefined) return html`<p class="muted">Loading…</p>`
  if (s.nodes.length === 0) return html`<p class="muted">No node has joined (start one with <code>warren node --join …</code>).</p>`
  return html`
    <table class="table" id="nodes">
      <thead><tr><th>node</th><th>CPU (requested / capacity)</th><th>memory</th><th>sandboxes</th><th>backends</th><th class="num">layers</th></tr></thead>
      <tbody>${s.nodes.map((n) => html`<${NodeRow} key=${n.id} n=${n} />`)}</tbody>
    </table>
    ${s.nodesOmitted > 0 ? html`<p class="muted small">${s.nodesOmitted} more nodes not listed.</p>` : null}`
}

export function Layers (props: { stats: ClusterStats | undefined }) {
  const s = props.stats
  if (s === undefined) return html`<p class="muted">Loading…</p>`
  const alive = s.nodes.filter((n) => n.alive).length
  const running = s.nodes.reduce((a, n) => a + sum(n.usage.sandboxes), 0)
  const lastMinute = s.creations.slice(-60)
  const createdLastMinute = lastMinute.reduce((a, p) => a + p.created, 0)
  const p99 = lastMinute.reduce((a, p) => Math.max(a, p.p99 ?? 0), 0)
  return html`
    <div class="figures" id="cluster-figures">
      <div class="figure"><div class="figure-value">${running}</div><div class="figure-label">sandboxes running</div></div>
      <div class="figure"><div class="figure-value">${createdLastMinute}</div><div class="figure-label">created in the last minute</div></div>
      <div class="figure"><div class="figure-value">${p99 > 0 ? `${p99} ms` : '–'}</div><div class="figure-label">worst p99, last minute</div></div>
    </div>
    <div class="figures" id="layers">
      <div class="figure"><div class="figure-value">${s.layers.distinct}</div><div class="figure-label">distinct layers cached</div></div>
      <div class="figure"><div class="figure-value">${s.layers.copies}</div><div class="figure-label">cached copies</div></div>
      <div class="figure"><div class="figure-value">${alive}/${s.nodes.length + s.nodesOmitted}</div><div class="figure-label">nodes alive</div></div>
    </div>
    ${s.layers.top.length > 0
      ? html`<table class="table compact"><thead><tr><th>layer</th><th class="num">nodes caching it</th></tr></thead>
          <tbody>${s.layers.top.map((l) => html`<tr key=${l.digest}><td><code title=${l.digest}>${shortDigest(l.digest)}</code></td><td class="num">${l.nodes}</td></tr>`)}</tbody></table>`
      : html`<p class="muted small">No layer is cached yet (sandboxes without an image use the built-in busybox).</p>`}`
}
