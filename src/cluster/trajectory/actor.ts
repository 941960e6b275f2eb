/**
 * `cp/trajectories`: the control plane's actor over the trajectory store. Nodes send it batches
 * of their logs (answered with the acknowledgement); sessions read pages and record blobs for
 * their tenant; a sandbox made again under its id asks where its steps go on. Every so often it
 * forgets trajectories past their retention, and deletes from the blob store the record blobs no
 * trajectory references any more. A tenant whose trajectories hold more than its quota
 * (`trajectoryBytes`) loses its oldest ended ones at once, so one tenant cannot fill the disk.
 */
import { open, rm } from 'node:fs/promises'
import { Actor } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { storePaths } from '../../images/blob/index.js'
import { createLogWindows, silentLogger, type Logger, type LogWindows } from '../../log/index.js'
import { SpecDefaults } from '../spec.js'
import type { TrajectoryStore } from './store.js'
import { TrajectoryDefaults, type ShipBatch } from './types.js'

export type TrajectoriesMessage =
  | ShipBatch
  | { type: 'read', tenant: string, sandboxId: string, fromSeq: number, limit?: number }
  /** Bytes `[offset, offset + length)` of a record blob the tenant's trajectory references. */
  | { type: 'blob', tenant: string, sandboxId: string, digest: string, offset: number, length: number }
  | { type: 'next-seq', sandboxId: string }
  /** Whether the tenant's sandbox has a trajectory that has not ended (`TrajectoryStore.isOpen`). */
  | { type: 'open', tenant: string, sandboxId: string }
  | { type: 'sweep' }

export interface TrajectoriesOptions {
  store: TrajectoryStore
  /** The blob store's root; without one no record blobs are kept (nodes keep head and tail instead). */
  blobRoot?: string
  /** How long a trajectory is kept after its sandbox ended (`TrajectoryDefaults.retentionMs`). */
  retentionMs?: number
  /** The bytes of trajectories a tenant may keep (its quota `trajectoryBytes`); without it, no bound but the retention. */
  quotaOf?: (tenant: string) => number
  log?: Logger
}

export class Trajectories extends Actor<TrajectoriesMessage> {
  private readonly retentionMs: number
  /** One line a minute per tenant whose trajectories go for its quota, however many batches push it over. */
  private readonly trims: LogWindows<string, { deleted: number, bytes: number, limit: number }>

  constructor (private readonly o: TrajectoriesOptions) {
    super()
    this.retentionMs = o.retentionMs ?? TrajectoryDefaults.retentionMs
    const log = o.log ?? silentLogger()
    this.trims = createLogWindows(60_000, {
      first: (tenant, e) => log.info({ tenant, ...e }, 'trajectories past the tenant\'s quota forgotten, oldest ended first'),
      summary: (tenant, count) => log.info({ tenant, batches: count }, 'more trajectories past the tenant\'s quota forgotten')
    })
  }

  postStop (): void {
    this.trims.close()
  }

  preStart (): void {
    // A short retention (a test's, an operator's) is swept about four times within it.
    const every = Math.min(TrajectoryDefaults.sweepEveryMs, Math.max(100, Math.floor(this.retentionMs / 4)))
    this.ctx.setTimer('sweep', every, { type: 'sweep' }, { repeat: true })
  }

  receive (m: TrajectoriesMessage): unknown {
    switch (m.type) {
      case 'append': {
        const ack = this.o.store.append(m)
        this.trim()
        return ack
      }
      case 'read': return this.o.store.read(m.tenant, m.sandboxId, m.fromSeq, m.limit)
      case 'blob':
        this.o.store.checkBlob(m.tenant, m.sandboxId, m.digest)
        return this.ctx.answerLater(this.readBlob(m.digest, m.offset, Math.min(m.length, TrajectoryDefaults.maxBlobReadBytes)))
      case 'next-seq': return this.o.store.nextSeq(m.sandboxId)
      case 'open': return this.o.store.isOpen(m.tenant, m.sandboxId)
      case 'sweep':
        this.sweep()
        return undefined
    }
  }

  private async readBlob (digest: string, offset: number, length: number): Promise<Uint8Array> {
    if (this.o.blobRoot === undefined) throw createError(ErrorCodes.NOT_FOUND, `blob ${digest} is not in the blob store`, { field: 'digest' })
    let file
    try {
      file = await open(storePaths(this.o.blobRoot, digest).blob, 'r')
    } catch {
      throw createError(ErrorCodes.NOT_FOUND, `blob ${digest} is not in the blob store`, { field: 'digest' })
    }
    try {
      const bytes = Buffer.allocUnsafe(length)
      let got = 0
      while (got < length) {
        const { bytesRead } = await file.read(bytes, got, length - got, offset + got)
        if (bytesRead === 0) break
        got += bytesRead
      }
      return bytes.subarray(0, got)
    } finally {
      await file.close()
    }
  }

  /** Forgets, for each tenant past its quota, its oldest ended trajectories until it is within it. */
  private trim (): void {
    const quotaOf = this.o.quotaOf
    if (quotaOf === undefined) return
    for (const tenant of this.o.store.tenantsOver(quotaOf)) {
      const limit = quotaOf(tenant)
      const { deleted, orphans } = this.o.store.trim(tenant, limit)
      this.deleteBlobs(orphans)
      if (deleted > 0) this.trims.note(tenant, { deleted, bytes: this.o.store.bytesOf(tenant), limit }, '')
    }
  }

  private deleteBlobs (digests: string[]): void {
    if (this.o.blobRoot === undefined) return
    for (const digest of digests) {
      const paths = storePaths(this.o.blobRoot, digest)
      void Promise.all([rm(paths.blob, { force: true }), rm(paths.manifest, { force: true })]).catch(() => {})
    }
  }

  private sweep (): void {
    this.trim()
    const now = Date.now()
    // A trajectory whose sandbox never said it ended (its node was lost) goes once that sandbox could no longer be alive.
    for (let round = 0; round < 10; round++) {
      const { deleted, orphans } = this.o.store.sweep(now - this.retentionMs, now - this.retentionMs - SpecDefaults.maxTtlMs)
      this.deleteBlobs(orphans)
      if (deleted < 1000) return
    }
  }
}

/** The factory of `cp/trajectories`, a child of the control plane's root. */
export function createTrajectories (options: TrajectoriesOptions): () => Trajectories {
  return () => new Trajectories(options)
}
