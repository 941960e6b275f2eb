/**
 * Creation rate and latency over the last minutes, drawn with uPlot (canvas: one draw per
 * update, whatever the number of points). The data is the control plane's ring of seconds.
 */
import { html } from 'htm/preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import type { CreationPoint } from './types.js'

type Series = Array<{ label: string, stroke: string, fill?: string, bars?: boolean }>

/** Counts per second as bars (a lone second stays visible); latencies as lines with points. */
const bars = uPlot.paths.bars!({ size: [0.9, 12, 3] })

function Chart (props: { id: string, title: string, unit: string, series: Series, data: uPlot.AlignedData }) {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)

  useEffect(() => {
    const el = box.current!
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth), height: 180,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        { stroke: '#8b93a7', grid: { stroke: '#232838' }, ticks: { stroke: '#232838' } },
        { stroke: '#8b93a7', grid: { stroke: '#232838' }, ticks: { stroke: '#232838' }, label: props.unit, labelSize: 18, size: 50 }
      ],
      series: [{}, ...props.series.map((s): uPlot.Series => ({
        label: s.label, stroke: s.stroke, width: s.bars === true ? 1 : 2, spanGaps: false,
        points: { show: s.bars !== true, size: 4 },
        ...(s.bars === true ? { paths: bars } : {}),
        ...(s.fill !== undefined ? { fill: s.fill } : {})
      }))]
    }
    plot.current = new uPlot(opts, props.data, el)
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 180 }))
    ro.observe(el)
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = null }
  }, [])

  useEffect(() => { plot.current?.setData(props.data) }, [props.data])

  return html`<figure class="chart" id=${props.id}><figcaption>${props.title}</figcaption><div ref=${box} class="chart-box"></div></figure>`
}

export function CreationCharts (props: { points: CreationPoint[] | undefined, windowSec: number }) {
  const points = props.points ?? []
  const t = points.map((p) => p.t / 1000)
  const totalCreated = points.reduce((a, p) => a + p.created, 0)
  const totalFailed = points.reduce((a, p) => a + p.failed, 0)
  const rate: uPlot.AlignedData = [t, points.map((p) => p.created), points.map((p) => p.failed)]
  const latency: uPlot.AlignedData = [t, points.map((p) => p.p50 ?? null), points.map((p) => p.p90 ?? null), points.map((p) => p.p99 ?? null)]
  return html`
    <div class="muted small chart-note">Last ${Math.round(props.windowSec / 60)} minutes: <b id="created-total">${totalCreated}</b> created, ${totalFailed} failed.</div>
    <div class="charts">
      <${Chart} id="chart-rate" title="Creations per second" unit="per s" data=${rate}
        series=${[{ label: 'created', stroke: '#4ade80', fill: 'rgba(74,222,128,0.55)', bars: true }, { label: 'failed', stroke: '#f87171', fill: 'rgba(248,113,113,0.55)', bars: true }]} />
      <${Chart} id="chart-latency" title="Creation latency" unit="ms" data=${latency}
        series=${[{ label: 'p50', stroke: '#60a5fa' }, { label: 'p90', stroke: '#fbbf24' }, { label: 'p99', stroke: '#f472b6' }]} />
    </div>`
}
