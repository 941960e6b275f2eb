/** Reads Prometheus text as a scraper would, for tests: every sample with its labels. */
import { request } from 'node:http'

export interface PromSample { name: string, labels: Record<string, string>, value: number }

/** Parses the text exposition format (no exemplars, no timestamps: prom-client writes none). */
export function parseProm (text: string): PromSample[] {
  const out: PromSample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!
    out.push({ name: m[1]!, labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) })
  }
  return out
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
export function sampleSum (samples: PromSample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0)
}

/** True when some sample is named `name` and has `labels`. */
export function hasSample (samples: PromSample[], name: string, labels: Record<string, string> = {}): boolean {
  return samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
}

export interface HttpAnswer { status: number, headers: Record<string, string | string[] | undefined>, body: string }

/** One plain HTTP request to the control plane's port, with its own timeout. */
export function httpGet (base: string, path: string, opts: { method?: string, headers?: Record<string, string>, timeoutMs?: number } = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base.replace(/^ws/, 'http')), { method: opts.method ?? 'GET', headers: opts.headers ?? {}, timeout: opts.timeoutMs ?? 10_000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)))
    req.on('error', reject)
    req.end()
  })
}

/** Scrapes /metrics and parses it. */
export async function scrape (base: string, headers: Record<string, string> = {}): Promise<PromSample[]> {
  const r = await httpGet(base, '/metrics', { headers })
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.body}`)
  return parseProm(r.body)
}
