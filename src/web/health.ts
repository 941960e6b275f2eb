/**
 * `/healthz` and `/readyz`, for load balancers and Kubernetes probes; neither takes a key, and
 * neither says more than whether and why not. Live: the process serves HTTP. Ready: every
 * placement shard runs and at least one node is alive, so a create can be placed.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { readOnly, text } from './respond.js'

export interface Readiness { ready: boolean, reason?: string }

export interface HealthOptions {
  /** Why the control plane cannot take work now, or ready. */
  readiness: () => Promise<Readiness>
}

export const HealthDefaults = {
  /** A readiness check that takes longer than this answers 503 (a probe must not hang). */
  readyTimeoutMs: 2000
}

/** Answers `/healthz`: 200 while the process serves. */
export function healthz (req: IncomingMessage, res: ServerResponse): void {
  if (readOnly(req, res)) text(res, 200, 'ok\n')
}

/** Answers `/readyz`: 200 `ready`, or 503 with the reason. */
export async function readyz (o: HealthOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!readOnly(req, res)) return
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<Readiness>((resolve) => { timer = setTimeout(() => resolve({ ready: false, reason: 'the readiness check did not answer in time' }), HealthDefaults.readyTimeoutMs) })
  const r = await Promise.race([o.readiness().catch((err: unknown) => ({ ready: false, reason: (err as Error).message })), late])
  clearTimeout(timer)
  if (r.ready) text(res, 200, 'ready\n')
  else text(res, 503, `not ready: ${r.reason ?? 'unknown'}\n`)
}
