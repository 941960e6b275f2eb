/**
 * `/metrics`: the Prometheus text of the control plane and its nodes. Open by default, as
 * scrapers usually have no key, and it holds nothing secret: no key, token, spec or command,
 * and tenants only as counts (no tenant label at all). With a metrics token (`warren up
 * --metrics-token`), a scrape must send `Authorization: Bearer <token>`.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { readOnly, text } from './respond.js'

export interface MetricsRouteOptions {
  /** The exposition and its content type (ControlMetrics). */
  metrics: { text (): Promise<string>, readonly contentType: string }
  /** Set: scrapes must present it as a bearer token. */
  token?: string
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/** True when the request carries the token (compared in constant time, over digests so lengths do not leak). */
function authorized (req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? ''
  const given = header.startsWith('Bearer ') ? header.slice(7) : ''
  return timingSafeEqual(digest(given), digest(token))
}

/** Answers `/metrics`. */
export async function metricsRoute (o: MetricsRouteOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!readOnly(req, res)) return
  if (o.token !== undefined && !authorized(req, o.token)) {
    text(res, 401, 'a metrics token is required: Authorization: Bearer <token>\n', { 'WWW-Authenticate': 'Bearer realm="warren metrics"' })
    return
  }
  let body: string
  try {
    body = await o.metrics.text()
  } catch (err) {
    text(res, 500, `metrics could not be read: ${(err as Error).message}\n`)
    return
  }
  res.writeHead(200, { 'Content-Type': o.metrics.contentType, 'Content-Length': String(Buffer.byteLength(body)), 'Cache-Control': 'no-store' })
  res.end(req.method === 'HEAD' ? undefined : body)
}
