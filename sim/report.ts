/**
 * What a simulation says, for people: a text table for the terminal and a self-contained HTML
 * page with SVG charts (no scripts, no external files), written from a Summary.
 */
import type { Percentiles, Summary } from './engine.js'

const fmt = (n: number): string => n.toLocaleString('en', { maximumFractionDigits: 1 })
const pct = (p: Percentiles, unit = ''): string => `p50 ${fmt(p.p50)}${unit}  p90 ${fmt(p.p90)}${unit}  p99 ${fmt(p.p99)}${unit}  max ${fmt(p.max)}${unit}`

/** A table of the headline figures. */
export function textTable (s: Summary): string {
  const rows: Array<[string, string]> = [
    ['simulated', `${fmt(s.simulatedMs / 3_600_000)} h on ${s.nodes} nodes, ${s.shards} shards, seed ${s.seed}`],
    ['created', `${fmt(s.created)} of ${fmt(s.requested)} asked (+${fmt(s.residents)} running at the start)`],
    ['rejected', `${fmt(s.rejected)} no capacity, ${fmt(s.overloaded)} overloaded, ${fmt(s.otherErrors)} other`],
    ['failed', `${fmt(s.failedOnLostNode)} on a node not yet known lost, ${fmt(s.shardErrors)} while a shard restarted`],
    ['peak concurrent', `${fmt(s.peakConcurrent)} at ${fmt(s.peakAtMs / 3_600_000)} h`],
    ['create latency', pct(s.createLatencyMs, ' ms')],
    ['placement wait', pct(s.placementWaitMs, ' ms')],
    ['cpu used / core', pct(s.utilisation.cpuUsed)],
    ['cpu requested / core', pct(s.utilisation.cpuRequested)],
    ['memory requested', pct(s.utilisation.memoryRequested)],
    ['sandboxes / cap', pct(s.utilisation.sandboxesOfCap)],
    ['layer cache hits', `${fmt(s.layerCacheHitRatio * 100)} %`],
    ['bytes fetched', `${fmt(s.bytesFetched / 1e12)} TB by cold starts`],
    ['cold start', pct(s.coldStartMs, ' ms')],
    ['node crashes', `${fmt(s.nodeCrashes)} (ending ${fmt(s.crashedSandboxes)} sandboxes)`],
    ['loss noticed after', pct(s.lossDetectionMs, ' ms')],
    ['shard crashes', `${fmt(s.shardCrashes)} (restarted by their supervisor)${s.overPromised > 0 ? `; ${fmt(s.overPromised)} placements over a node's limits` : ''}`],
    ['wall time', `${fmt(s.wallMs / 1000)} s for ${fmt(s.events)} events`]
  ]
  const width = Math.max(...rows.map(([k]) => k.length))
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n') + '\n'
}

function lineChart (values: number[], everyMs: number, title: string): string {
  const w = 760
  const h = 220
  const pad = 40
  const max = Math.max(1, ...values)
  const step = values.length > 1 ? (w - 2 * pad) / (values.length - 1) : 0
  const points = values.map((v, i) => `${(pad + i * step).toFixed(1)},${(h - pad - (v / max) * (h - 2 * pad)).toFixed(1)}`).join(' ')
  const hours = (values.length * everyMs) / 3_600_000
  return `<figure><figcaption>${title}</figcaption><svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img">
<line x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}" stroke="#888"/><line x1="${pad}" y1="${pad}" x2="${pad}" y2="${h - pad}" stroke="#888"/>
<text x="${pad}" y="${pad - 8}" font-size="11">${fmt(max)}</text><text x="${w - pad}" y="${h - pad + 16}" font-size="11" text-anchor="end">${fmt(hours)} h</text>
<polyline fill="none" stroke="#2a6" stroke-width="1.5" points="${points}"/></svg></figure>`
}

function barChart (bars: Array<[string, number]>, title: string, unit: string): string {
  const w = 760
  const rowH = 26
  const max = Math.max(1e-9, ...bars.map(([, v]) => v))
  const body = bars.map(([label, v], i) => {
    const len = (v / max) * (w - 220)
    return `<text x="0" y="${i * rowH + 17}" font-size="12">${label}</text><rect x="120" y="${i * rowH + 4}" width="${len.toFixed(1)}" height="18" fill="#37a"/><text x="${(124 + len).toFixed(1)}" y="${i * rowH + 17}" font-size="12">${fmt(v)}${unit}</text>`
  }).join('\n')
  return `<figure><figcaption>${title}</figcaption><svg viewBox="0 0 ${w} ${bars.length * rowH + 8}" width="${w}" height="${bars.length * rowH + 8}" role="img">${body}</svg></figure>`
}

const percentileBars = (p: Percentiles): Array<[string, number]> => [['p50', p.p50], ['p90', p.p90], ['p99', p.p99], ['max', p.max]]

/** A self-contained HTML report. */
export function htmlReport (s: Summary): string {
  const esc = (t: string): string => t.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  return `<!doctype html><html><head><meta charset="utf-8"><title>warren simulation, seed ${s.seed}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:820px}figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:.4em}pre{background:#f4f4f4;padding:1em}</style></head><body>
<h1>warren capacity simulation</h1>
<pre>${esc(textTable(s))}</pre>
${lineChart(s.concurrent.values, s.concurrent.everyMs, 'Concurrent sandboxes over time')}
${barChart(percentileBars(s.createLatencyMs), 'Creation latency (ms)', ' ms')}
${barChart(percentileBars(s.utilisation.cpuRequested), 'Node CPU requested per core', '')}
${barChart(percentileBars(s.utilisation.sandboxesOfCap), 'Node sandboxes as a share of the cap', '')}
${barChart([['hits', s.layerCacheHitRatio * 100], ['misses', (1 - s.layerCacheHitRatio) * 100]], 'Layer cache', ' %')}
${barChart([['fetched', s.bytesFetched / 1e9]], 'Bytes cold starts fetched from the blob store', ' GB')}
${barChart([['created', s.created], ['rejected', s.rejected], ['overloaded', s.overloaded], ['on a lost node', s.failedOnLostNode], ['shard down', s.shardErrors], ['crash-ended', s.crashedSandboxes]], 'Creations, rejections and failures', '')}
${s.nodeCrashes > 0 ? barChart(percentileBars(s.lossDetectionMs), 'From a node crash until the registry declares it lost (ms)', ' ms') : ''}
</body></html>
`
}
