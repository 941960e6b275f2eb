/**
 * Fixtures of the upload tests: a real control plane in this process with a blob store in a
 * temp data dir (no node: what is under test happens before placement), its keys, layer files
 * of seeded bytes and raw HTTP requests to its port.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ControlPlane } from '../../../src/cluster/index.js'
import { createManifest, type ChunkManifest } from '../../../src/images/blob/index.js'
import type { UploadTunables } from '../../../src/images/upload/index.js'
import { connect, type Client } from '../../../src/sdk/index.js'
import { ALL_SCOPES, startTestControlPlane } from '../../cluster/harness.js'
import type { Cleanup } from '../../support/index.js'
import { seededBytes, tempDir } from '../blob/helpers.js'
import type { Logger } from '../../../src/log/index.js'

export const KiB = 1024
/** Small chunks, so a small file is many chunks and many requests. */
export const CHUNK = 64 * KiB

export interface UploadCluster {
  dir: string
  cp: ControlPlane
  /** The blob store's root and the staging directory beside it. */
  blobs: string
  staging: string
  /** http://host:port of the gateway. */
  http: string
  /** Keys: admin, a builder that may push (tenant `builder`), a second pusher, a sandbox-only tenant. */
  keys: { admin: string, builder: string, other: string, tenant: string }
  admin: Client
  tenant: Client
}

export async function uploadCluster (defer: Cleanup['defer'], upload: Partial<UploadTunables> = { maxRequestBytes: 256 * KiB }, logger?: Logger): Promise<UploadCluster> {
  const dir = tempDir(defer, 'warren-upload-')
  const cp = await startTestControlPlane({ dataDir: join(dir, 'cp'), upload, ...(logger !== undefined ? { logger } : {}) })
  defer(() => cp.close())
  const keys = {
    admin: await cp.createToken('ops', ['admin']),
    builder: await cp.createToken('builder', ['image:push']),
    other: await cp.createToken('other', ['image:push']),
    tenant: await cp.createToken('tenant-a', [...ALL_SCOPES])
  }
  const admin = await connect({ url: cp.url, token: keys.admin })
  defer(() => admin.close())
  const tenant = await connect({ url: cp.url, token: keys.tenant })
  defer(() => tenant.close())
  return { dir, cp, blobs: join(dir, 'cp', 'blobs'), staging: join(dir, 'cp', 'uploads'), http: cp.url.replace(/^ws/, 'http'), keys, admin, tenant }
}

/** A layer file of `size` seeded bytes, and its manifest at CHUNK. */
export async function layerFile (dir: string, name: string, size: number, seed: number): Promise<{ file: string, bytes: Buffer, manifest: ChunkManifest }> {
  const file = join(dir, name)
  const bytes = seededBytes(size, seed)
  writeFileSync(file, bytes)
  return { file, bytes, manifest: await createManifest(file, CHUNK) }
}

/** An answer: `body` is any JSON (or text) the store sent; each test checks the fields it reads. */
export interface Answer { status: number, body: any }

/** One raw request to the gateway's HTTP side. */
export async function call (c: UploadCluster, method: string, path: string, token: string | undefined, body?: Uint8Array | string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${c.http}${path}`, {
    method,
    headers: { ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}), ...headers },
    ...(body !== undefined ? { body } : {})
  })
  const text = await res.text()
  let parsed: unknown = text
  try { parsed = JSON.parse(text) } catch { /* a plain-text answer (the read side's) */ }
  return { status: res.status, body: parsed }
}

/** The upload path of a digest. */
export const uploadPath = (digest: string): string => `/uploads/sha256/${digest.slice('sha256:'.length)}`

/** Begins an upload of `manifest` as `kind`. */
export function begin (c: UploadCluster, token: string, manifest: ChunkManifest, kind = 'base'): Promise<Answer> {
  return call(c, 'POST', uploadPath(manifest.digest), token, JSON.stringify({ kind, manifest }), { 'content-type': 'application/json' })
}

/** Sends bytes `[start, end)` of a layer. */
export function patch (c: UploadCluster, token: string, digest: string, bytes: Uint8Array, start: number, end: number): Promise<Answer> {
  return call(c, 'PATCH', uploadPath(digest), token, bytes.subarray(start, end), { 'upload-offset': String(start) })
}
