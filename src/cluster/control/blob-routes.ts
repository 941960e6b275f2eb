/**
 * The plain-HTTP side of the gateway's port: layer reads for nodes (the join token), layer
 * uploads for builds (an API key that may push: admin or `image:push`). WebSocket upgrades
 * never reach here; they are links.
 */
import { join } from 'node:path'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Ref } from '../../actors/index.js'
import { createError, ErrorCodes } from '../../errors.js'
import { createBlobHandler } from '../../images/blob/index.js'
import { createUploadHandler, isUploadPath, type UploadTunables } from '../../images/upload/index.js'
import { authorize, type IamMessage, type Principal } from '../iam/index.js'
import { LAYER_KINDS, NODE_BLOB_KINDS } from '../../images/index.js'
import type { ImageIndexMessage } from './image-index.js'
import { toPublicError } from './public-error.js'
import { levelOf, type RefusalLog } from './request-outcomes.js'
import type { RequestRate, TenantRequestRates } from './request-rates.js'

/** The uploader nodes' pushes are staged and counted under (no tenant is named so: tenant names start with a letter or digit). */
export const NODE_UPLOADER = '_nodes'

export interface BlobRoutesOptions {
  /** The blob store's root; without one there is nothing to read and uploads are refused. */
  blobRoot?: string
  iam: () => Ref<IamMessage>
  images: () => Ref<ImageIndexMessage>
  upload?: Partial<UploadTunables>
  /** The tenants' request rates: each upload request of a tenant's key takes from its bucket, as a link request does. */
  rates?: TenantRequestRates
  /** The gateway's refusal log, where a refused upload request is logged as a refused link request is (a bad key too). */
  refusals?: () => RefusalLog | undefined
}

export interface BlobRoutes {
  handle (req: IncomingMessage, res: ServerResponse): void
  close (): void
}

export function createBlobRoutes (o: BlobRoutesOptions): BlobRoutes {
  const reads = createBlobHandler({
    root: o.blobRoot ?? '/nonexistent',
    authorize: async (token) => o.blobRoot !== undefined && await o.iam().ask<boolean>({ type: 'check-join', token })
  })
  const uploads = o.blobRoot === undefined
    ? undefined
    : createUploadHandler({
      root: o.blobRoot,
      // Beside the store, on its file system, so a commit is a rename; never under its object keys.
      stagingDir: join(o.blobRoot, '..', 'uploads'),
      ...(o.upload !== undefined ? { tunables: o.upload } : {}),
      authenticate: async (token) => {
        const principal = await o.iam().ask<Principal | null>({ type: 'authenticate', token })
        if (principal !== null) {
          authorize(principal, 'image:push')
          if (o.rates !== undefined) {
            await o.rates.learn(principal.tenant, async () => await o.iam().ask<RequestRate>({ type: 'get-quotas', tenant: principal.tenant }))
            const refusal = o.rates.admit(principal)
            if (refusal !== undefined) throw refusal
          }
          return { tenant: principal.tenant, kinds: LAYER_KINDS }
        }
        // A node pushes what it makes (snapshot layers, trajectory records) with its join token.
        if (await o.iam().ask<boolean>({ type: 'check-join', token })) return { tenant: NODE_UPLOADER, kinds: NODE_BLOB_KINDS }
        throw createError(ErrorCodes.UNAUTHENTICATED, 'the token is not a live API key')
      },
      recordLayer: async (digest, kind) => { await o.images().ask({ type: 'layer-stored', digest, kind }) },
      onRefused: (err, req) => {
        const pub = toPublicError(err)
        const address = req.socket.remoteAddress ?? '?'
        // By code: whose key it was is what a refusal for a bad key cannot say.
        o.refusals?.()?.note(`- ${pub.code} upload`, { level: levelOf(pub.code), fields: {
          code: pub.code, type: 'upload', method: String(req.method).slice(0, 16), path: String(req.url).slice(0, 128), address, reason: pub.message.slice(0, 1024)
        } }, address)
      }
    })
  return {
    handle (req, res) {
      if (!isUploadPath(req.url)) { reads(req, res); return }
      if (uploads !== undefined) { uploads.handle(req, res); return }
      const body = JSON.stringify({ code: ErrorCodes.UNSUPPORTED, message: 'this control plane keeps no blob store (it has no data dir)' })
      res.writeHead(501, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), Connection: 'close' }).end(body)
    },
    close () { uploads?.close() }
  }
}
