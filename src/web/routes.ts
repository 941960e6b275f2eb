/**
 * The control plane's own HTTP routes, on the gateway's port beside the blob store: health,
 * readiness and metrics (the live page adds its routes here). A request for any other path is
 * not handled here (`handle` returns false) and goes on to the blob store.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { healthz, readyz, type HealthOptions } from './health.js'
import { metricsRoute, type MetricsRouteOptions } from './metrics.js'
import { pathOf, text } from './respond.js'

export interface WebRoutesOptions extends HealthOptions {
  /** Without it, /metrics answers 404. */
  metrics?: MetricsRouteOptions
}

export interface WebRoutes {
  /** Answers the request when its path is one of these routes; false otherwise. */
  handle (req: IncomingMessage, res: ServerResponse): boolean
}

/** The routes, by exact path. */
export function createWebRoutes (o: WebRoutesOptions): WebRoutes {
  const failed = (res: ServerResponse) => (err: unknown): void => {
    if (!res.headersSent) text(res, 500, `${(err as Error).message}\n`)
    else res.destroy()
  }
  return {
    handle (req, res) {
      switch (pathOf(req)) {
        case '/healthz': healthz(req, res); return true
        case '/readyz': readyz(o, req, res).catch(failed(res)); return true
        case '/metrics':
          if (o.metrics === undefined) { text(res, 404, 'no metrics here\n'); return true }
          metricsRoute(o.metrics, req, res).catch(failed(res))
          return true
        default: return false
      }
    }
  }
}
