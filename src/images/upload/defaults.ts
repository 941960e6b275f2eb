/**
 * Every bound of layer uploads (builds pushing to the control plane's blob store over HTTP), in
 * one object. A client's upload can take no more disk, memory or time than these allow.
 */
import { checkInt } from '../blob/defaults.js'

const MiB = 1024 * 1024
const GiB = 1024 * MiB

export interface UploadTunables {
  /** Largest layer an upload may declare; a larger one is refused before any byte is sent. */
  maxLayerBytes: number
  /**
   * Largest request body (a run of chunks, or a begin's manifest). Also the largest chunk size
   * an upload's manifest may have, since a chunk is checked whole as it arrives.
   */
  maxRequestBytes: number
  /** Uploads a tenant may have open (staged, not yet committed or aborted) at once. */
  maxUploadsPerTenant: number
  /** Uploads open across all tenants: bounds the staging disk at this times `maxLayerBytes`. */
  maxUploads: number
  /** Upload requests handled at once (each may buffer one body); beyond this: 503. */
  maxConcurrentRequests: number
  /** An upload nobody wrote to for this long is removed, with its staged bytes. */
  idleTimeoutMs: number
  /** How often abandoned uploads are looked for. */
  sweepIntervalMs: number
  /** Time one request may take to arrive whole; a slower one is cut off. */
  requestTimeoutMs: number
}

export const UploadDefaults: Readonly<UploadTunables> = Object.freeze({
  maxLayerBytes: 64 * GiB,
  maxRequestBytes: 8 * MiB,
  maxUploadsPerTenant: 4,
  maxUploads: 32,
  maxConcurrentRequests: 16,
  idleTimeoutMs: 15 * 60_000,
  sweepIntervalMs: 60_000,
  requestTimeoutMs: 60_000
})

/**
 * The defaults with `input` over them, each checked.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the tunable
 */
export function uploadTunables (input: Partial<UploadTunables> = {}): UploadTunables {
  const t = { ...UploadDefaults, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) }
  checkInt('maxLayerBytes', t.maxLayerBytes, 1)
  checkInt('maxRequestBytes', t.maxRequestBytes, 64 * 1024, 256 * MiB)
  checkInt('maxUploadsPerTenant', t.maxUploadsPerTenant, 1)
  checkInt('maxUploads', t.maxUploads, 1)
  checkInt('maxConcurrentRequests', t.maxConcurrentRequests, 1)
  checkInt('idleTimeoutMs', t.idleTimeoutMs, 1)
  checkInt('sweepIntervalMs', t.sweepIntervalMs, 1)
  checkInt('requestTimeoutMs', t.requestTimeoutMs, 1)
  return t
}
