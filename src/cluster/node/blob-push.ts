/**
 * BlobPusher: how a node puts what it makes into the control plane's blob store — snapshot
 * layers, and the bytes a trajectory keeps beyond what fits inline. Over the same HTTP uploads
 * operators' builds use, with the node's join token (which may push only `snapshot` and
 * `record` blobs). Pushes run a few at a time (the store bounds open uploads per uploader), and
 * a push the store is too busy for waits its turn instead of failing the sandbox's request.
 */
import { pushLayerOverHttp } from '../../images/upload/index.js'
import type { BlobKind } from '../../images/index.js'
import { createError, ErrorCodes, isWarrenError } from '../../errors.js'

export const BlobPushDefaults = {
  /** Pushes in flight at once from one node (the store allows 4 open uploads per uploader). */
  concurrency: 2,
  /** Pushes waiting their turn; beyond it a push is refused as OVERLOADED. */
  maxQueued: 1000,
  /** Retries of a push the store refused with QUOTA (its open uploads full), a second apart. */
  quotaRetries: 30
}

export interface PushedBlob {
  digest: string
  bytes: number
}

/** Pushes one file (it must not change until the push resolves) and answers with its digest. */
export type BlobPusher = (file: string, kind: BlobKind) => Promise<PushedBlob>

/**
 * @param url the control plane's URL (`ws://…` or `http://…`, `wss://`/`https://` with TLS)
 * @param joinToken the node's join token
 * @param ca the control plane's CA (PEM) when its certificate is not one the system trusts
 */
export function createBlobPusher (url: string, joinToken: string, o = BlobPushDefaults, ca?: string): BlobPusher {
  let running = 0
  const waiting: Array<() => void> = []
  const turn = async (): Promise<void> => {
    if (running < o.concurrency) { running++; return }
    if (waiting.length >= o.maxQueued) throw createError(ErrorCodes.OVERLOADED, `node has ${waiting.length} blob pushes waiting`, { retryAfterMs: 1000 })
    await new Promise<void>((resolve) => waiting.push(resolve))
  }
  const done = (): void => {
    const next = waiting.shift()
    if (next !== undefined) next()
    else running--
  }
  return async (file, kind) => {
    await turn()
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const pushed = await pushLayerOverHttp(file, { url, token: joinToken, kind, ...(ca !== undefined ? { ca } : {}) })
          return { digest: pushed.digest, bytes: pushed.size }
        } catch (err) {
          if (!isWarrenError(err, ErrorCodes.QUOTA) || attempt >= o.quotaRetries) throw err
          await new Promise((resolve) => setTimeout(resolve, 1000))
        }
      }
    } finally {
      done()
    }
  }
}
