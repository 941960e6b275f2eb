/**
 * The layer server: the node's on-demand layers (chunk cache + FUSE file system, see lazy.ts) in
 * a process of their own, reached over a transport link on a Unix socket.
 *
 * Why a process of its own: a sandbox's EROFS mount reads through the FUSE connection of the
 * process that serves it. Served by the node agent, that connection died with the agent and the
 * sandbox with it, though its processes live on to be adopted. Served from here, sandboxes keep
 * their layers through any restart of the agent, which reconnects and tells the server which
 * users survived (`sync`).
 */
import { silentLogger, type Logger } from '../../log/index.js'
import { rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { createError, ErrorCodes } from '../../errors.js'
import { isDigest } from '../blob/index.js'
import { createLinkServer, type Link } from '../../transport/index.js'
import { clearStaleLayerFs } from '../fuse/index.js'
import { createLazyLayers, type LazyLayers } from '../lazy.js'
import { LayerServerDefaults, LAYERS_ADDRESS, NODE_ADDRESS, type LayerReadFailure, type LayerServerConfig, type LayerServerRequest } from './protocol.js'

export interface LayerServer {
  /** Resolves when the server has stopped (asked to, or idle with no user). */
  readonly stopped: Promise<void>
  close (): Promise<void>
}

function digestOf (m: { digest?: unknown }): string {
  if (!isDigest(m.digest)) throw createError(ErrorCodes.INVALID_ARGUMENT, 'digest must be sha256:<64 hex>', { field: 'digest' })
  return m.digest
}

/**
 * Starts serving the layers on `config.mountpoint`.
 * @param log where read failures are logged (none: silent)
 */
export async function startLayerServer (config: LayerServerConfig, log: Logger = silentLogger()): Promise<LayerServer> {
  // No other server can be serving this mount point (the node starts one only when none answers).
  await clearStaleLayerFs(config.mountpoint)
  const links = new Set<Link>()
  const lazy: LazyLayers = await createLazyLayers({
    source: { baseUrl: config.baseUrl, token: config.blobToken, ...(config.ca !== undefined ? { ca: config.ca } : {}) },
    cacheDir: config.cacheDir,
    mountpoint: config.mountpoint,
    ...(config.maxBytes !== undefined ? { maxBytes: config.maxBytes } : {}),
    onError: (err) => {
      log.warn({ err }, 'layer read failed')
      const failure: LayerReadFailure = { type: 'read-failed', message: err.message }
      for (const link of links) { try { link.tell(NODE_ADDRESS, failure) } catch { /* closing */ } }
    }
  })

  let closing: Promise<void> | undefined
  let resolveStopped!: () => void
  const stopped = new Promise<void>((resolve) => { resolveStopped = resolve })
  const handle = async (m: LayerServerRequest): Promise<unknown> => {
    switch (m.type) {
      case 'resolve': return await lazy.resolve(digestOf(m))
      case 'release': await lazy.release(digestOf(m)); return true
      case 'cached': return lazy.cached()
      case 'metrics': return lazy.metrics()
      case 'sync': {
        const users: Record<string, number> = {}
        for (const [d, n] of Object.entries(m.users ?? {})) {
          if (isDigest(d) && Number.isInteger(n) && n > 0) users[d] = n
        }
        await lazy.sync(users)
        return true
      }
      case 'shutdown':
        // A tell, not a request: the link closes with the server, so a reply might never leave.
        setImmediate(() => { void close() })
        return undefined
      default:
        throw createError(ErrorCodes.INVALID_ARGUMENT, `unknown layer server request ${String((m as { type?: unknown }).type)}`)
    }
  }

  rmSync(config.socketPath, { force: true })
  const http = createServer()
  const server = createLinkServer({
    server: http,
    authenticate: (token) => token === config.authToken ? 'node' : null,
    handler: {
      tell: (to, message) => {
        if (to === LAYERS_ADDRESS && (message as LayerServerRequest)?.type === 'shutdown') void handle({ type: 'shutdown' })
      },
      request: async (to, message) => {
        if (to !== LAYERS_ADDRESS) throw createError(ErrorCodes.NO_SUCH_ACTOR, `no ${to} here`)
        return await handle(message as LayerServerRequest)
      }
    }
  })
  let linked = false
  server.on('link', (link) => { linked = true; links.add(link); link.once('close', () => links.delete(link)) })
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(config.socketPath, () => { http.off('error', reject); resolve() })
  })

  // An orphan (its node never came back) ends once nothing uses its layers; one whose node died
  // before it dialled, once the first client's grace is past too.
  let idleSince = Date.now()
  const firstClientBy = Date.now() + Math.max(config.idleExitMs, LayerServerDefaults.firstClientGraceMs)
  const idle = setInterval(() => {
    if (links.size > 0 || lazy.inUse() > 0) { idleSince = Date.now(); return }
    if (!linked && Date.now() < firstClientBy) return
    if (Date.now() - idleSince >= config.idleExitMs) void close()
  }, Math.min(10_000, Math.max(100, config.idleExitMs / 4)))

  async function close (): Promise<void> {
    closing ??= (async () => {
      clearInterval(idle)
      await server.close().catch(() => {})
      await new Promise<void>((resolve) => http.close(() => resolve()))
      await lazy.close()
      rmSync(config.socketPath, { force: true })
      resolveStopped()
    })()
    return await closing
  }
  return { stopped, close }
}
