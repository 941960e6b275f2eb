/** The control plane's HTTP routes beside the blob store (docs/design.md, layout). */
export { createWebRoutes, type WebRoutes, type WebRoutesOptions } from './routes.js'
export { HealthDefaults, type HealthOptions, type Readiness } from './health.js'
export type { MetricsRouteOptions } from './metrics.js'
