/**
 * The node's side of its layer server (server.ts says why the server is a process of its own).
 *
 * `startLayerService` finds this node's server (its pid alive, its socket answering) or starts
 * one, detached so it outlives the agent, and talks to it over a transport link. When the server
 * dies the link's reconnects find it gone and start it again, as a supervisor would; sandboxes
 * whose layers it served lose them (reads fail), the node and new sandboxes carry on.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createError, ErrorCodes } from '../../errors.js'
import { createLinkClient, type LinkClient } from '../../transport/index.js'
import type { LayerSource } from '../store.js'
import { LAYERS_ADDRESS, LayerServerDefaults, NODE_ADDRESS, type CacheMetrics, type LayerReadFailure, type LayerServerConfig, type LayerServerRequest } from './protocol.js'

export interface LayerServiceOptions {
  /** The server's socket, token, pid and log live here (one directory per node). */
  dir: string
  cacheDir: string
  mountpoint: string
  source: LayerSource
  maxBytes?: number
  idleExitMs?: number
  /** A read inside a sandbox failed (the sandbox got EIO). */
  onError?: (message: string) => void
  /**
   * The server died and a new one was started: the mounts the old one served are dead, so the
   * sandboxes reading layers through them have lost those layers.
   */
  onRestart?: () => void
}

/** Layers on demand as the node uses them (the same calls as LazyLayers, served by another process). */
export interface LayerService {
  /** The path of the layer's FUSE-presented file, ready to mount; counts one user. */
  resolve (digest: string): Promise<string>
  release (digest: string): Promise<void>
  /** Digests the server's cache holds, as last heard (placement reads it often; refreshed every few seconds). */
  cached (): string[]
  metrics (): Promise<CacheMetrics>
  /** The users each layer has now, from what survived a restart of the agent. */
  sync (users: Record<string, number>): Promise<void>
  /** The server's pid. */
  readonly pid: number
  /** Stops the server: the node is shutting down and has reclaimed its sandboxes. */
  close (): Promise<void>
  /** Drops the link only, leaving the server to serve the sandboxes (as a crash of the agent does). */
  detach (): Promise<void>
}

const serverMain = fileURLToPath(new URL('./main.js', import.meta.url))

/** True when `pid` is a live layer server (not merely a live process: pids are reused, after a reboot say). */
function alive (pid: number | undefined): boolean {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return false
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(serverMain)
  } catch {
    return false
  }
}

function readText (path: string): string | undefined {
  try { return readFileSync(path, 'utf8').trim() } catch { return undefined }
}

export async function startLayerService (o: LayerServiceOptions): Promise<LayerService> {
  mkdirSync(o.dir, { recursive: true, mode: 0o700 })
  const socketPath = join(o.dir, 'layers.sock')
  const tokenFile = join(o.dir, 'token')
  const pidFile = join(o.dir, 'pid')
  const logFile = join(o.dir, 'server.log')

  const spawnServer = (authToken: string): number => {
    const config: LayerServerConfig = {
      socketPath, authToken, cacheDir: o.cacheDir, mountpoint: o.mountpoint,
      baseUrl: o.source.baseUrl, blobToken: o.source.token, ...(o.source.ca !== undefined ? { ca: o.source.ca } : {}),
      idleExitMs: o.idleExitMs ?? LayerServerDefaults.idleExitMs,
      ...(o.maxBytes !== undefined ? { maxBytes: o.maxBytes } : {})
    }
    // One server's log at a time, and not more than a little of it: a new server starts it afresh.
    const log = openSync(logFile, existsSync(logFile) && statSync(logFile).size > LayerServerDefaults.maxLogBytes ? 'w' : 'a', 0o600)
    try {
      // Detached: its own session, so neither the agent's death nor a signal to its group ends it.
      const child = spawn(process.execPath, [serverMain], {
        detached: true,
        stdio: ['ignore', log, log],
        env: { ...process.env, [LayerServerDefaults.envVar]: JSON.stringify(config) }
      })
      child.unref()
      if (child.pid === undefined) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the layer server did not start', { log: logFile })
      writeFileSync(pidFile, String(child.pid), { mode: 0o600 })
      return child.pid
    } finally {
      closeSync(log)
    }
  }

  let token = readText(tokenFile)
  let pid = Number(readText(pidFile))
  if (token === undefined || !alive(pid) || !existsSync(socketPath)) {
    // A server we cannot talk to (its token or socket gone) must not share the mount point with a new one.
    if (alive(pid)) {
      process.kill(pid, 'SIGTERM')
      for (let i = 0; i < 100 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 50))
      if (alive(pid)) process.kill(pid, 'SIGKILL')
    }
    token = randomBytes(24).toString('base64url')
    writeFileSync(tokenFile, token, { mode: 0o600 })
    pid = spawnServer(token)
  }
  const authToken = token

  let detached = false
  const link: LinkClient = createLinkClient({
    url: `ws+unix://${socketPath}:/`,
    token: authToken,
    reconnect: { minDelayMs: 50, maxDelayMs: 2000 },
    handler: {
      tell: (to, message) => {
        if (to === NODE_ADDRESS && (message as LayerReadFailure)?.type === 'read-failed') o.onError?.(String((message as LayerReadFailure).message))
      }
    }
  })
  // The supervision: a reconnect that finds the server dead starts it again (same token, so
  // the link is welcome there).
  link.on('reconnect', () => {
    if (detached || alive(pid)) return
    pid = spawnServer(authToken)
    o.onRestart?.()
  })

  const started = pid
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      link.connect(),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(createError(ErrorCodes.BACKEND_UNAVAILABLE,
          `the layer server (pid ${started}) did not answer within ${LayerServerDefaults.startTimeoutMs} ms: ${readText(logFile)?.split('\n').slice(-3).join(' | ') ?? 'no log'}`,
          { log: logFile })), LayerServerDefaults.startTimeoutMs)
      })
    ])
  } catch (err) {
    detached = true
    link.close()
    throw err
  } finally {
    clearTimeout(timer)
  }

  const ask = <R>(m: LayerServerRequest, timeoutMs = 10_000): Promise<R> => link.request<R>(LAYERS_ADDRESS, m, { timeoutMs })
  let cached: string[] = []
  const refresh = (): void => { ask<string[]>({ type: 'cached' }).then((c) => { cached = c }, () => {}) }
  refresh()
  const refresher = setInterval(refresh, LayerServerDefaults.refreshMs)
  refresher.unref()

  return {
    get pid () { return pid },
    async resolve (digest) {
      const path = await ask<string>({ type: 'resolve', digest }, LayerServerDefaults.resolveTimeoutMs)
      refresh()
      return path
    },
    async release (digest) { await ask({ type: 'release', digest }) },
    cached: () => cached,
    metrics: () => ask<CacheMetrics>({ type: 'metrics' }),
    async sync (users) { await ask({ type: 'sync', users }) },
    async close () {
      detached = true
      clearInterval(refresher)
      try { link.tell(LAYERS_ADDRESS, { type: 'shutdown' } satisfies LayerServerRequest) } catch { /* closed already */ }
      // The server unmounts and exits; wait for it, so a next start finds the mount point free.
      for (let i = 0; i < 200 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 50))
      link.close()
    },
    async detach () {
      detached = true
      clearInterval(refresher)
      link.close()
    }
  }
}
