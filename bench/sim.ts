/**
 * `npm run bench -- sim`: one simulated DSec day (160 nodes of 187 cores and 1.5 TiB, ~3 M
 * creations, bursts of 5,000/s) through the real placement shards on a virtual clock.
 * Progress on stderr; the last line is one JSON object.
 */
import { runSimulation } from '../sim/engine.js'

let peakRss = 0
const rssTimer = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage().rss) }, 200)
const seed = Number(process.argv[2] ?? 1)
const summary = await runSimulation({
  seed,
  onProgress: (p) => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss)
    process.stderr.write(`sim: ${(p.simulatedMs / 3_600_000).toFixed(0)} h simulated, ${p.concurrent} running, ${p.created} created, ${p.rejected} rejected, ${p.events} events, ${(p.wallMs / 1000).toFixed(1)} s wall\n`)
  }
})
clearInterval(rssTimer)
peakRss = Math.max(peakRss, process.memoryUsage().rss)
const { concurrent, ...rest } = summary
process.stderr.write(`sim: summary ${JSON.stringify(rest)}\n`)
process.stdout.write(JSON.stringify({
  bench: 'sim',
  simulated_s: summary.simulatedMs / 1000,
  wall_s: Math.round(summary.wallMs / 100) / 10,
  sandboxes: summary.created,
  peak_concurrent: summary.peakConcurrent,
  events_per_s: Math.round(summary.events / (summary.wallMs / 1000)),
  peak_rss_mb: Math.round(peakRss / 1048576),
  rejected: summary.rejected,
  create_p99_ms: summary.createLatencyMs.p99
}) + '\n')
