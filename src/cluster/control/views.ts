/** What a client is shown of a sandbox's record. */
import type { SandboxRecord } from './directory.js'

/** A sandbox as the SDK sees it. */
export interface SandboxView {
  id: string
  state: SandboxRecord['state']
  backend: string
  labels: Record<string, string>
  nodeId: string
  createdAt: number
  expiresAt: number
  reason?: string
  message?: string
  /** Hibernated: the snapshot it resumes from. */
  snapshot?: string
}

/** The view of a record: no tenant, address, placement or spec. */
export function toView (r: SandboxRecord): SandboxView {
  return {
    id: r.id, state: r.state, backend: r.backend, labels: r.labels, nodeId: r.nodeId, createdAt: r.createdAt, expiresAt: r.expiresAt,
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    ...(r.message !== undefined ? { message: r.message } : {}),
    ...(r.state === 'hibernated' && r.snapshot !== undefined ? { snapshot: r.snapshot } : {})
  }
}
